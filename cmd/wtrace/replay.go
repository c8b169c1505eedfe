package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/artifact"
	"github.com/wtrace/wtrace/edit"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/healthz"
	"github.com/wtrace/wtrace/internal/hostfilter"
	"github.com/wtrace/wtrace/internal/outfile"
	"github.com/wtrace/wtrace/internal/units"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/perturb"
	"github.com/wtrace/wtrace/replay/record"
)

type replayOptions struct {
	s             streams
	path          string
	speed         float64
	loop          bool
	hold          bool
	eventChunks   bool
	listen        string
	useTLS        bool
	cert, key     string
	kubeconfigOut string
	writeTimeout  time.Duration
	idleTimeout   time.Duration
	verbose       bool
	writes        string
	out           string
	keepSecrets   bool
	from, to      string
	logFormat     string
	shutdownGrace time.Duration
	shutdownDelay time.Duration
	metrics       bool
	pace          string
	quietWindow   time.Duration
	clients       []string
	exitWhenDone  bool
	acceptHosts   string
	rejectPaths   string
	plainHTTP     bool
	control       bool
	servingFile   string
	perturb       []string
	perturbSpecs  []perturb.Spec
}

func newReplayCmd(s streams, runF func(*replayOptions) error) *cobra.Command {
	o := &replayOptions{s: s}
	c := &cobra.Command{
		Use:   "replay SESSION.wt|oci://REF|https://URL",
		Short: "Serve a recorded session to real clients with the original timing",
		Long: `Replay serves a session in one of two ways (--writes):

  answer    (default) an apiserver whose world is the recording's
            environment: for a controller under test
  apply     the same (an older name)
  reject    the recording as a tape, read-only: for informers, kubectl -w,
            scale tests; every write gets 403 Forbidden
  recorded  the tape alone: no world, a write the session does not hold
            gets 404

THE WORLD (answer). The clients under test — by default every client of a
session recorded through the proxy, none of a capture; --client picks them by
user agent or address — are what a run is compared with: their writes, and
what those writes made, are never replayed. Everything else the recording
shows (kubectl, other controllers, kubelets) is the environment: applied to
the world change by change, at its recorded time scaled by --speed (from the
run's first watch, as the recorded clients' first watch), or with --pace quiet
each once the clients have been quiet for --quiet-window, so a controller
reconciles each change before the next and every run sees the same sequence.
A change the run made moot (an object it deleted, a Pod it never created) is
dropped and logged; a change to an object the run changed applies on top of
the run's version. Every read — GET, LIST, WATCH, discovery, OpenAPI — is
answered from the world when it arrives; writes are answered as kube-apiserver
v1.33 does (defaults, admission, field validation, status and finalize
subresources, finalizers), once their watch events went out. --exit-when-done
ends the replay once the environment was played and the clients were quiet;
'wtrace diff session.wt run.wt' then judges the run (--out run.wt).

THE TAPE (reject, recorded). Each request is matched with a recorded exchange
(method, path, labelSelector/fieldSelector and watch; resourceVersion, limit,
continue and timeouts may differ), and the recorded response is sent back —
headers, exact bytes, chunk boundaries, and each watch event at its recorded
time after the request arrived, scaled by --speed. Streams end the way they
were recorded (clean end, FIN or RST). Every client gets its own timeline; a
slow client never delays another. An informer that lists and watches sees the
recorded LIST, then the WATCH that followed it. Clients that ask for a
streaming list (client-go's WatchList) get one built from a recorded LIST +
WATCH, and the reverse. A watch past the session's last event stays open and
quiet until its timeoutSeconds; a watch from a resourceVersion the session
does not hold gets a 410 Expired event, so the client relists. With reject,
reads the session did not record (an object's GET, another label selector)
are answered from the session's world.

Both: discovery (/api, /apis, …) is served as recorded or synthesized from the
session's resources, so kubectl works; each client gets the encoding its
Accept header asks for (JSON, protobuf, Table for kubectl, metadata-only); the
log says how each request was answered (how=recorded, synth-…) and what was
transcoded (transcoded=…).

The session is a file, an OCI artifact in a registry (oci://REF, as 'wtrace
push' or 'oras push' put it there; credentials from the Docker
configuration, $DOCKER_CONFIG) or a file at a URL (https://URL, #sha256=HEX
to check it): a remote one is fetched into a temporary file first (TMPDIR,
removed at the end), checked against its digest, while the port already
answers /livez (and /readyz: not ready).

--from starts the replay at a point of the session (a duration after its
start, 42m, or an RFC 3339 time) without waiting for it: clients get the world
as it was then — what 'wtrace slice --from' writes, a LIST synthesized at the
resourceVersion of each open watch's last event before that point, or a
streaming list's initial events — then the recording from there on. --to ends
the replay there: nothing recorded later is served, and watches stay open and
quiet as at the end of a capture. The slice goes to a temporary file that no
directory names (released when the replay ends).

--out FILE records the run: every request the clients made, with its body,
and every answer, with both times, as a session file (source "replay") that
inspect, events and diff read. Secret values are redacted unless
--keep-secrets.

--control serves, on the replay's port, the control endpoint that a test in
another process — in any language — drives the run with (docs/CONTROL.md;
the Go module github.com/wtrace/wtrace/wtracetest is its client): GET
/wtrace/v1/settle waits until the environment was played and the clients
are quiet, /wtrace/v1/environment and /wtrace/v1/requests say what the
replay did and what the clients asked, POST /wtrace/v1/stop stops the
replay as SIGTERM does. --serving-file FILE writes, once the replay serves,
where it does: its URL, certificate, kubeconfig, control endpoint, run.

By default the server listens on 127.0.0.1:8080 over plain HTTP, and serves,
like kubectl proxy, only requests to localhost, 127.0.0.1 and [::1]
(--accept-hosts: a web page whose name resolves to 127.0.0.1 cannot read the
session; a Service's name, say, must be accepted) and no exec, attach or
portforward (--reject-paths). Requests are logged on stderr (--log-format
json: one JSON object a line); stdout stays empty.

The server answers /livez, /readyz and /healthz itself, as kube-apiserver
does (for probes; /readyz passes once the session is loaded — the port
answers while it loads — and fails from the first SIGTERM), and /metrics in
the Prometheus text format (watchers, connections, requests by verb,
resource, code and how they were answered, events and bytes sent, event
lateness, writes applied, sessions loaded; Go and process metrics) unless
--metrics=false.

SIGTERM or Ctrl-C stops the server gracefully: /readyz fails at once (500,
the shutdown check), the server goes on serving for --shutdown-delay (0; in a
Deployment, longer than the readiness probe's period, so that the Service
stops sending new clients before the port closes: none is refused), then it
stops accepting, every open watch ends cleanly (its terminating chunk; over HTTP/2
END_STREAM after a GOAWAY) so that informers re-watch elsewhere, --out is
flushed and closed, and wtrace exits 0 — within --shutdown-grace, after which
what is left is cut. A second signal exits at once (status 1).`,
		Example: `  # serve with the original timing, then watch with curl
  wtrace replay session.wt
  curl -N 'http://127.0.0.1:8080/api/v1/namespaces/demo/configmaps?watch=true'

  # as a service (in a container): on every interface, read-only, JSON logs;
  # /livez, /readyz, /metrics on the same port
  wtrace replay /data/session.wt --listen 0.0.0.0:8080 --accept-hosts '.*' --writes reject --log-format json

  # ten times faster, forever
  wtrace replay session.wt --speed 10 --loop

  # as fast as the client reads
  wtrace replay session.wt --speed 0

  # start at minute 42 and stop at minute 45
  wtrace replay session.wt --from 42m --to 45m

  # HTTPS with a self-signed certificate and a kubeconfig for kubectl
  wtrace replay session.wt --tls --kubeconfig-out kc
  kubectl --kubeconfig kc get configmaps -n demo -w

  # a controller under test, each change of the recording's environment once
  # it is quiet; record what it did and judge it against the recording
  wtrace replay session.wt --pace quiet --exit-when-done --out run.wt --kubeconfig-out kc &
  my-controller --kubeconfig kc
  wtrace diff session.wt run.wt

  # a capture of many clients: the one whose user agent names my-operator
  # is under test, the others are its environment
  wtrace replay capture.wt --client 'user-agent=my-operator' --out run.wt

  # a session pushed to a registry (wtrace push), fetched at start
  wtrace replay oci://ghcr.io/me/sessions/controller:v1 --writes reject

  # driven by a test in another process (a Python or Java operator's test)
  wtrace replay session.wt --pace quiet --listen 127.0.0.1:0 --control \
    --serving-file serving.json --kubeconfig-out kc --out run.wt

  # the recording as a tape, read-only, for many informers
  wtrace replay session.wt --writes reject --speed 10`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			usage := func(format string, a ...any) error {
				return &usageError{fmt.Errorf(format+"\nSee 'wtrace replay --help'.", a...)}
			}
			o.path = args[0]
			if o.speed < 0 || math.IsNaN(o.speed) || math.IsInf(o.speed, 0) {
				return usage("--speed %v: must be 0 (as fast as possible) or a positive factor", o.speed)
			}
			if (o.cert == "") != (o.key == "") {
				return usage("--cert and --key go together")
			}
			o.useTLS = o.useTLS || o.cert != ""
			if _, err := replay.ParseWrites(o.writes); err != nil || o.writes == "" {
				return usage("--writes %q: want answer, apply, reject or recorded", o.writes)
			}
			if _, err := replay.ParsePace(o.pace); err != nil {
				return usage("--pace %q: want recorded or quiet", o.pace)
			}
			if _, _, err := world.ParseClients(o.clients); err != nil {
				return usage("--client: %v", err)
			}
			specs, err := perturb.ParseAll(o.perturb)
			if err != nil {
				return usage("--perturb: %v", err)
			}
			if len(specs) > 0 && !replay.Writes(o.writes).AnswersWrites() {
				return usage("--perturb needs a replay that answers writes from its world (--writes answer or apply)")
			}
			o.perturbSpecs = specs
			if o.exitWhenDone && !replay.Writes(o.writes).AnswersWrites() {
				return usage("--exit-when-done needs a replay that answers writes (--writes answer)")
			}
			if o.keepSecrets && o.out == "" {
				return usage("--keep-secrets applies to --out")
			}
			if err := checkLogFormat(o.logFormat); err != nil {
				return err
			}
			if o.shutdownGrace < 0 {
				return usage("--shutdown-grace %v: must be 0 or more", o.shutdownGrace)
			}
			if o.shutdownDelay < 0 {
				return usage("--shutdown-delay %v: must be 0 or more", o.shutdownDelay)
			}
			if _, err := hostfilter.New(hostfilter.Split(o.acceptHosts), hostfilter.Split(o.rejectPaths)); err != nil {
				return usage("%v", strings.TrimPrefix(err.Error(), "hostfilter: "))
			}
			if runF != nil {
				return runF(o)
			}
			return runReplay(o)
		},
	}
	f := c.Flags()
	f.Float64Var(&o.speed, "speed", 1, "timing `factor`: 1 as recorded, 10 ten times faster, 0 as fast as the client reads")
	f.BoolVar(&o.loop, "loop", false, "restart each watch stream from its first event when it reaches its end, forever")
	f.BoolVar(&o.hold, "hold", false, "keep streams open after their last event instead of ending them as recorded")
	f.BoolVar(&o.eventChunks, "event-chunks", false, "send one chunk per watch event instead of the recorded chunk boundaries")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "`address` to listen on (host:port; port 0 picks a free one)")
	f.BoolVar(&o.useTLS, "tls", false, "serve HTTPS (HTTP/2 and HTTP/1.1) with a generated self-signed certificate")
	f.StringVar(&o.cert, "cert", "", "TLS certificate `file` (PEM) instead of a generated one; implies --tls")
	f.StringVar(&o.key, "key", "", "TLS private key `file` (PEM) for --cert")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "write a kubeconfig for the replay server to `file`")
	f.DurationVar(&o.writeTimeout, "write-timeout", replay.DefaultWriteTimeout, "drop a client that has not taken a write after this `duration`")
	f.DurationVar(&o.idleTimeout, "idle-timeout", replay.DefaultIdleTimeout, "close a keep-alive connection idle for this `duration` (watches are not idle; 0: never), as kube-apiserver does")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "also log when each stream ends, and why")
	f.StringVar(&o.writes, "writes", string(replay.WritesAnswer), "how writes are answered: `mode` answer, apply, reject or recorded")
	f.StringVar(&o.out, "out", "", "record the run (requests, bodies, answers) into the session `file` (- for stdout)")
	f.StringVar(&o.from, "from", "", "start at this point: a `duration` after the session's start (42m) or an RFC 3339 time")
	f.StringVar(&o.to, "to", "", "end at this point: a `duration` after the session's start or an RFC 3339 time")
	f.BoolVar(&o.keepSecrets, "keep-secrets", false, "with --out: store Secret objects' values as served (credentials in headers are never stored)")
	f.StringVar(&o.logFormat, "log-format", "text", "log `format` on stderr: text (short lines) or json (one object a line, log/slog)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 20*time.Second, "on SIGTERM, how long open watches and requests get to end cleanly (`duration`) before they are cut")
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "on SIGTERM, serve on this long (`duration`) with /readyz failing before the listener closes, so that a load balancer stops sending new clients first (kube-apiserver's --shutdown-delay-duration)")
	f.BoolVar(&o.metrics, "metrics", true, "serve Prometheus metrics at /metrics")
	f.StringVar(&o.acceptHosts, "accept-hosts", hostfilter.DefaultAcceptHosts, "serve only requests to these hosts: comma-separated `regexps`, as kubectl proxy's (the Host without its port)")
	f.StringVar(&o.rejectPaths, "reject-paths", hostfilter.DefaultRejectPaths, "refuse these paths: comma-separated `regexps`, as kubectl proxy's ('' refuses none)")
	f.StringVar(&o.pace, "pace", string(replay.PaceRecorded), "when the environment's changes are applied: `pace` recorded (their recorded times, scaled by --speed) or quiet (each once the clients have been quiet for --quiet-window)")
	f.DurationVar(&o.quietWindow, "quiet-window", replay.DefaultQuietWindow, "with --pace quiet (and --exit-when-done): how long the clients must be quiet, a `duration`")
	f.StringArrayVar(&o.clients, "client", nil, "the client under test in the recording: `selector` user-agent=REGEXP, addr=IP[:PORT], both (comma), all or none; repeatable (default: every client of a proxy recording, none of a capture)")
	f.BoolVar(&o.exitWhenDone, "exit-when-done", false, "exit (0) once the environment was played and the clients were then quiet for --quiet-window")
	f.BoolVar(&o.control, "control", false, "serve the control endpoint at /wtrace/v1/ (settle, environment, requests, stop: docs/CONTROL.md) for a test in another process")
	f.StringArrayVar(&o.perturb, "perturb", nil, "a perturbation of the run: `spec` KIND[:KEY=VALUE,...] (watch-close, gone, stale, skip, restart, throttle, error, conflict, delay, client-restart; go doc replay/perturb); repeatable")
	f.StringVar(&o.servingFile, "serving-file", "", "once serving, write to `file` a JSON object saying where: url, caPEM, kubeconfig, control, run (docs/CONTROL.md)")
	f.BoolVar(&o.plainHTTP, "plain-http", false, "oci:// sessions: speak plain HTTP to the registry (loopback and private addresses do anyway)")
	return c
}

func runReplay(o *replayOptions) error {
	if err := noOverwrite([]string{o.out, o.kubeconfigOut, o.servingFile}, o.path, o.cert, o.key); err != nil {
		return err
	}
	s := o.s
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := newLogger(s, o.logFormat, level)
	tell := func(text, msg string, args ...any) { // a line for a person, or a log record in JSON
		if o.logFormat == "json" {
			log.Info(msg, args...)
		} else {
			fmt.Fprintln(s.err, text)
		}
	}
	return interruptible(func() {
		tell("\nStopping: ending open watches cleanly (Ctrl-C again to exit at once)", "replay: stopping: ending open watches cleanly; a second signal exits at once", "grace", o.shutdownGrace.String(), "delay", o.shutdownDelay.String())
	}, func() { tell("Aborted.", "replay: aborted") },
		func(stopping context.Context) error { return serveReplay(stopping, o, log, tell) })
}

// serveReplay serves the session until stopping is done (or, with
// --exit-when-done, the clients are quiet), then shuts the server down
// within --shutdown-grace.
func serveReplay(stopping context.Context, o *replayOptions, log *slog.Logger, tell func(text, msg string, args ...any)) (err error) {
	s, sessionPath := o.s, o.path
	// A stop asked through the control endpoint ends the replay as the
	// first signal does.
	serving, stopServing := context.WithCancel(stopping)
	defer stopServing()
	opts := replay.Options{
		Speed:        o.speed,
		Loop:         o.loop,
		Hold:         o.hold,
		EventChunks:  o.eventChunks,
		Listen:       o.listen,
		WriteTimeout: o.writeTimeout,
		IdleTimeout:  o.idleTimeout,
		Logger:       log,
		Writes:       replay.Writes(o.writes),
		MaxRequests:  -1, // nobody reads them
		Pace:         replay.Pace(o.pace),
		QuietWindow:  o.quietWindow,
		AcceptHosts:  hostfilter.Split(o.acceptHosts),
		RejectPaths:  hostfilter.Split(o.rejectPaths),

		ShutdownDelay: o.shutdownDelay,
		Perturb:       o.perturbSpecs,
	}
	if o.control {
		opts.MaxRequests = 0 // the default: the control endpoint lists them
		opts.Control = &replay.Control{Session: o.path, Run: o.out, Stop: func() {
			tell("\nStopping (asked through the control endpoint): ending open watches cleanly", "replay: stopping: asked through the control endpoint")
			stopServing()
		}}
	}
	if opts.Clients, opts.NoClients, err = world.ParseClients(o.clients); err != nil {
		return &usageError{err}
	}
	if o.metrics {
		opts.Metrics = healthz.NewRegistry()
	}
	if o.idleTimeout == 0 {
		opts.IdleTimeout = -1 // never
	}
	// Made now, so that the port answers probes over HTTPS while the
	// session loads, with the certificate it serves afterwards.
	if opts.Certificate, err = replay.Certificate(o.cert, o.key, o.useTLS, o.listen); err != nil {
		return withHint(err, "give a PEM certificate and its PEM private key (--cert, --key)")
	}
	// The port answers (/livez; /readyz not ready yet) while the session
	// is checked and its world loaded.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return withHint(fmt.Errorf("replay: %w", err), "pick another address with --listen 127.0.0.1:0 (a free port)")
	}
	pre := replay.Preload(ln, replay.PreloadOptions{Certificate: opts.Certificate, Metrics: opts.Metrics, Logger: log})
	opts.Listener = pre.Listener()
	handed := false
	defer func() {
		if !handed {
			pre.Close()
		}
	}()

	// A session in a registry or at a URL is fetched first (while the
	// port answers that it is loading), into a temporary file.
	if artifact.IsRemote(sessionPath) {
		local, cleanup, err := fetchSession(stopping, sessionPath, o.plainHTTP, log, tell)
		if err != nil {
			return err
		}
		defer cleanup()
		sessionPath = local
	}
	f, err := openSession(sessionPath)
	if err != nil {
		return err
	}
	defer f.Close()

	if o.from != "" || o.to != "" {
		from, to, err := sliceWindow(f.Index(), o.from, o.to)
		if err != nil {
			return err
		}
		sk, err := edit.SeekFile(stopping, f, sessionPath, "", edit.SliceOptions{From: from, To: to, Tool: "wtrace " + toolVersion()})
		if err != nil {
			return withHint(fmt.Errorf("--from/--to: %w", err), "wtrace verify %s; or set TMPDIR to a directory with room for the slice", sessionPath)
		}
		defer sk.Close()
		notes(s, sk.Result.Notes)
		f = sk.File
	}
	for _, p := range f.Problems() {
		tell(fmt.Sprintf("Warning: %s: %v", sessionPath, p), "replay: session problem", "session", sessionPath, "err", p)
	}
	var rec *record.Recorder
	if o.out != "" {
		rec, err = record.New(record.Options{Output: sessionOutput(s, o.out, formats.WriterOptions{}, sessionPath), Tool: "wtrace " + toolVersion(),
			KeepSecrets: o.keepSecrets, Description: "replay of " + filepath.Base(o.path), Labels: runLabels(o.path, o)})
		if err != nil {
			return outputError(err, "--out")
		}
		if o.keepSecrets {
			fmt.Fprintln(s.err, "Warning: --keep-secrets: Secret values are stored as served; treat the session file as a secret.")
		}
		opts.Out = rec
	}
	srv, err := replay.New(f, opts)
	if err != nil {
		if rec != nil {
			rec.Close()
		}
		return withHint(err, "try --writes recorded, which serves only what was recorded and keeps no world")
	}
	defer srv.Close()
	defer func() {
		if rec == nil {
			return
		}
		res, cerr := rec.Close() // the server first: every answer ends before the file
		if cerr != nil {
			if err == nil {
				err = fmt.Errorf("writing --out %s: %w", o.out, cerr)
			}
			return
		}
		if o.out != "-" {
			tell(fmt.Sprintf("Recorded the run: %d exchanges, %d watch events into %s (%s).", res.Exchanges, res.Events, o.out, units.Bytes(res.Size)),
				"replay: recorded the run", "exchanges", res.Exchanges, "events", res.Events, "file", o.out, "bytes", res.Size)
		}
	}()
	handed = true
	pre.Handoff()
	if o.useTLS {
		err = srv.StartTLS()
	} else {
		err = srv.Start()
	}
	if err != nil {
		return withHint(err, "pick another address with --listen 127.0.0.1:0 (a free port)")
	}
	// What loading the world decompressed and parsed is garbage now: give
	// it back to the system at once, rather than over minutes as the
	// runtime would, so that the replay's resident memory is what it
	// serves from (its world, and the blocks the clients are read).
	go debug.FreeOSMemory()
	if o.kubeconfigOut != "" {
		if err := outfile.WriteFile(o.kubeconfigOut, srv.Kubeconfig(), 0o600); err != nil {
			return withHint(fmt.Errorf("writing --kubeconfig-out: %w", err), "check that the directory exists and is writable")
		}
	}
	banner := replay.BannerOptions{Session: o.path, Out: o.out, Kubeconfig: o.kubeconfigOut}
	if o.logFormat == "json" {
		srv.LogBanner(log, banner)
	} else {
		srv.WriteBanner(s.err, banner)
	}
	defer func() {
		if env := srv.Environment(); env != nil && o.logFormat == "json" {
			env.Log(log)
		} else if env != nil {
			env.WriteText(s.err)
		}
	}()

	if o.servingFile != "" {
		if err := writeServingFile(o, srv); err != nil {
			return withHint(fmt.Errorf("writing --serving-file: %w", err), "check that the directory exists and is writable")
		}
	}
	if o.exitWhenDone && srv.Settle(serving.Done(), o.quietWindow) {
		tell("The environment was played and the clients are quiet: stopping.", "replay: the environment was played and the clients are quiet: stopping")
	} else {
		<-serving.Done()
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.shutdownDelay+o.shutdownGrace)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("replay: shutdown grace period over: what was still open was cut", "grace", o.shutdownGrace.String(), "err", err)
	} else {
		log.Debug("replay: shut down", "took", time.Since(start).String())
	}
	return nil
}

// runLabels are the labels of a run's session file (--out): what was
// replayed, and how.
func runLabels(sessionPath string, o *replayOptions) map[string]string {
	l := map[string]string{"session": filepath.Base(sessionPath), "writes": o.writes}
	if replay.Writes(o.writes).AnswersWrites() {
		l["pace"] = o.pace
		if len(o.clients) > 0 {
			l["client"] = strings.Join(o.clients, " | ")
		}
		if len(o.perturbSpecs) > 0 {
			specs := make([]string, len(o.perturbSpecs))
			for i, sp := range o.perturbSpecs {
				specs[i] = sp.String()
			}
			l["perturb"] = strings.Join(specs, " | ")
		}
	}
	return l
}

// serving is what --serving-file holds (docs/CONTROL.md): where a test
// in another process finds the replay it started.
type serving struct {
	APIVersion string `json:"apiVersion"` // wtrace/v1
	Kind       string `json:"kind"`       // Serving
	// URL is the replay's base URL, CAPEM the certificate to trust over
	// HTTPS ("" over HTTP).
	URL   string `json:"url"`
	CAPEM string `json:"caPEM,omitempty"`
	// Kubeconfig is the --kubeconfig-out file, Control the control
	// endpoint (--control), Run the --out file: absolute paths and URLs,
	// "" when not asked for.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Control    string `json:"control,omitempty"`
	Run        string `json:"run,omitempty"`
	PID        int    `json:"pid"`
}

func writeServingFile(o *replayOptions, srv *replay.Server) error {
	abs := func(p string) string {
		if p == "" || p == "-" {
			return ""
		}
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	sv := serving{APIVersion: replay.ControlAPIVersion, Kind: "Serving", URL: srv.URL, Kubeconfig: abs(o.kubeconfigOut), Run: abs(o.out), PID: os.Getpid()}
	if o.useTLS {
		sv.CAPEM = string(srv.CertPEM())
	}
	if o.control {
		sv.Control = srv.URL + replay.ControlPrefix
	}
	b, err := json.MarshalIndent(sv, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(o.servingFile, append(b, '\n'), 0o600)
}
