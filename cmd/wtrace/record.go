package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/hostfilter"
	"github.com/wtrace/wtrace/internal/progress"
	"github.com/wtrace/wtrace/internal/units"
)

type recordOptions struct {
	s           streams
	pcap        string
	out         string
	port        int
	keepSecrets bool
	keylog      string
	maxBuffered int
	maxConns    int
	memLimit    string
	compression string
	blockSize   string
	// captureSHA256 also hashes the capture file with SHA-256.
	captureSHA256 bool

	// Live sources (record_live.go).
	iface       string
	hosts       []string
	pcapOut     string
	proxy       bool
	listen      string
	kubeconfig  string
	context     string
	tls         bool
	acceptHosts string
	rejectPaths string
	maxDuration time.Duration
	maxSize     string
	rotate      bool
	// The proxy as a service (service.go).
	healthListen  string
	metrics       bool
	logFormat     string
	shutdownGrace time.Duration
}

func newRecordCmd(s streams, runF func(*recordOptions) error) *cobra.Command {
	o := &recordOptions{s: s}
	c := &cobra.Command{
		Use:   "record (--pcap FILE | --iface NAME | --proxy) -o OUT.wt",
		Short: "Record Kubernetes watch streams into a session file: from a capture, an interface, or as a proxy",
		Long: `Record writes every HTTP exchange it sees — requests, responses, and each
watch event with its exact bytes and the time it passed — to a session file.
It takes exactly one source:

  --pcap FILE    a packet capture (pcap or pcapng, optionally gzip'd or
                 zstd'd): its TCP connections are reassembled and parsed.
  --iface NAME   a live capture on a network interface (Linux; needs
                 CAP_NET_RAW), through the same pipeline as --pcap. --port
                 and --host filter in the kernel; --pcap-out keeps the raw
                 packets too.
  --proxy        a reverse proxy to the cluster of a kubeconfig, like
                 'kubectl proxy': point clients at --listen (default
                 127.0.0.1:8001); every byte the proxy sends them is
                 recorded as it was sent (headers, chunks, times).

The HTTP side of each captured connection is found from the traffic itself;
--port forces it (and records only that port). Credentials in headers
(Authorization, cookies, bearer tokens) and in query strings are never
stored. Secret values, their last-applied-configuration and
TokenRequest/TokenReview tokens are replaced (lengths kept), decided by what
each body and event holds, unless --keep-secrets; what was replaced, and
why, is listed by 'wtrace inspect'.

Live recordings (--iface, --proxy) run until Ctrl-C (or SIGTERM), or until
--max-duration or --max-size is reached; with --rotate they go on in
numbered files instead: -o s.wt writes s-0001.wt, s-0002.wt, … each usable
on its own (connections and exchanges still open are announced again at the
start of the next file). Blocks are flushed every second, so a crash loses
at most about a second; the file is fsync'd every 10 seconds and at the end.

-o is never one of the files record reads (--pcap, --keylog, the
kubeconfig), and a recording of a capture file replaces it only once
complete; a live recording is in place from its first second on.

Progress is shown on stderr when it is a terminal; a summary is printed at
the end. The first Ctrl-C (or SIGTERM) stops and closes the session cleanly
(--iface: open watches end as cut by the recording; --proxy: the proxy stops
accepting, ends every watch it proxies at its next event boundary with a
clean terminator — the terminating chunk, END_STREAM after a GOAWAY — so its
clients re-watch, lets other requests finish, within --shutdown-grace); a
second one aborts (a live recording's file stays readable up to its last
block; --pcap writes nothing over -o).

--proxy serves, like kubectl proxy, only requests to localhost, 127.0.0.1
and [::1] (--accept-hosts: a web page whose name resolves to 127.0.0.1
cannot use the kubeconfig's credentials) and refuses exec, attach and
portforward (--reject-paths).`,
		Example: `  # a capture taken with tcpdump
  tcpdump -i lo -w capture.pcap tcp port 8001
  wtrace record --pcap capture.pcap -o session.wt

  # only port 8001, from a gzip'd pcapng
  wtrace record --pcap capture.pcapng.gz --port 8001 -o session.wt

  # live, on the loopback interface (as root, or with cap_net_raw), Ctrl-C to finish
  wtrace record --iface lo --port 8001 -o session.wt

  # live TLS: the clients log their keys into a file wtrace re-reads as it grows
  touch keys.log; SSLKEYLOGFILE=keys.log ./my-controller &
  wtrace record --iface lo --port 6443 --keylog keys.log -o session.wt

  # as a proxy in front of the cluster of ~/.kube/config, then point clients at it
  wtrace record --proxy -o session.wt
  kubectl --server http://127.0.0.1:8001 get pods -A -w

  # as a sidecar: probes and Prometheus on :8081, JSON logs
  wtrace record --proxy --listen 127.0.0.1:8001 --health-listen 0.0.0.0:8081 --log-format json -o /data/s.wt

  # one hour of the prod context at most, in files of at most 2 GiB
  wtrace record --proxy --kubeconfig kc --context prod --max-duration 1h --max-size 2GiB --rotate -o s.wt`,
		Args: exactArgs(0, "no arguments (the source is given with --pcap, --iface or --proxy)"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.validate(c); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			setMemoryLimit(o.memLimit)
			switch {
			case o.iface != "":
				return runRecordIface(o)
			case o.proxy:
				return runRecordProxy(o)
			}
			return runRecord(o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.pcap, "pcap", "", "packet capture `file` to read (pcap/pcapng, .gz/.zst ok; - for stdin)")
	f.StringVar(&o.iface, "iface", "", "capture live on the network interface `name` (Linux, needs CAP_NET_RAW)")
	f.BoolVar(&o.proxy, "proxy", false, "record as a reverse proxy to the cluster of a kubeconfig")
	f.StringVarP(&o.out, "out", "o", "", "session `file` to write (.wt); - for stdout")
	f.IntVar(&o.port, "port", 0, "server TCP `port` to record (default: find HTTP from the traffic)")
	f.StringSliceVar(&o.hosts, "host", nil, "--iface: record only traffic to or from this `address` (repeatable)")
	f.StringVar(&o.pcapOut, "pcap-out", "", "--iface: also write the captured packets to this pcap `file`")
	f.StringVar(&o.listen, "listen", "", "--proxy: `address` to listen on (default 127.0.0.1:8001)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "--proxy: kubeconfig `file` (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "--proxy: kubeconfig context `name` (default: the current context)")
	f.BoolVar(&o.tls, "tls", false, "--proxy: serve HTTPS with a generated self-signed certificate (HTTP/2 to clients that offer it, like client-go)")
	f.DurationVar(&o.maxDuration, "max-duration", 0, "live: stop (or, with --rotate, start the next file) after this `duration`")
	f.StringVar(&o.maxSize, "max-size", "", "live: stop (or, with --rotate, start the next file) at this `size` (500MB, 2GiB)")
	f.BoolVar(&o.rotate, "rotate", false, "live: at --max-duration or --max-size, go on in numbered files (s-0001.wt, …)")
	f.BoolVar(&o.keepSecrets, "keep-secrets", false, "store Secret values and tokens as captured (credentials in headers and queries are never stored)")
	f.BoolVar(&o.captureSHA256, "capture-sha256", false, "--pcap: also hash the capture file with SHA-256 (for sha256sum) beside its XXH64 (for xxhsum), at about 0.3 s of CPU per 500 MB")
	f.StringVar(&o.keylog, "keylog", "", "--pcap, --iface: NSS key log `file` (SSLKEYLOGFILE) to decrypt TLS; with --iface, the file the clients are still writing (re-read as it grows)")
	f.IntVar(&o.maxBuffered, "max-buffered", 256<<20, "`bytes` of out-of-order TCP data to hold, over all connections")
	f.StringVar(&o.memLimit, "memory-limit", "192MiB", "soft `size` the Go garbage collector keeps the process under (0: none; GOMEMLIMIT wins)")
	f.StringVar(&o.compression, "compression", "", "zstd `level` of the session file: fastest, default, better, best (default: default for --pcap, in 4 MiB blocks; fastest for live and proxy recordings, whose blocks are cut every second)")
	f.StringVar(&o.blockSize, "block-size", "", "records per block of the session file before compression (`size`, 16KiB to 64MiB): larger compresses better, smaller loses less to damage and seeks faster (default: 4MiB for --pcap; 256KiB for live and proxy recordings, which also cut a block every second)")
	f.StringVar(&o.acceptHosts, "accept-hosts", hostfilter.DefaultAcceptHosts, "--proxy: serve only requests to these hosts: comma-separated `regexps`, as kubectl proxy's (the Host without its port)")
	f.StringVar(&o.rejectPaths, "reject-paths", hostfilter.DefaultRejectPaths, "--proxy: refuse these paths: comma-separated `regexps`, as kubectl proxy's ('' refuses none)")
	f.StringVar(&o.healthListen, "health-listen", "", "--proxy: serve the recording's own /livez, /readyz, /healthz and /metrics on this `address` (the --listen port forwards every path to the apiserver)")
	f.BoolVar(&o.metrics, "metrics", true, "--proxy: serve Prometheus metrics at /metrics of --health-listen")
	f.StringVar(&o.logFormat, "log-format", "text", "--proxy: log `format` on stderr: text or json (log/slog)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", proxy.DefaultShutdownGrace, "--proxy: on SIGTERM, how long open watches and requests get to end cleanly (`duration`: a watch at its next event boundary) before they are cut")
	f.IntVar(&o.maxConns, "max-conns", capture.DefaultMaxConns, "TCP connections open at once (`n`); past it, flows that never carried data make room first (oldest first), then half-closed, then idle connections")
	return c
}

// setMemoryLimit sets the soft memory limit of the Go runtime (see
// runtime/debug.SetMemoryLimit), unless GOMEMLIMIT sets it: the collector
// runs sooner as the heap nears it, instead of letting a heap of open
// work double before each collection. It is not a cap: what is open is
// kept, at the cost of more collections.
// (The flag was checked by validate.)
func setMemoryLimit(v string) {
	if os.Getenv("GOMEMLIMIT") != "" || v == "" || v == "0" {
		return
	}
	if n, err := units.ParseSize(v); err == nil && n > 0 {
		debug.SetMemoryLimit(n)
	}
}

func runRecord(o *recordOptions) error {
	s := o.s
	if err := noOverwrite([]string{o.out}, o.pcap, o.keylog); err != nil {
		return err
	}
	var in io.Reader
	var size int64
	name := o.pcap
	if o.pcap == "-" {
		in, name = s.in, "stdin"
	} else {
		f, err := os.Open(o.pcap)
		if err != nil {
			return withHint(err, "check the path given to --pcap")
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		in = f
	}
	keys, err := tlsdec.LoadKeyLog(o.keylog)
	switch {
	case errors.Is(err, tlsdec.ErrNoSecrets):
		return withHint(err, "a key log has lines like: CLIENT_TRAFFIC_SECRET_0 <client random> <secret>")
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return withHint(err, "check the path given to --keylog")
	case err != nil:
		return err
	}
	warnKeepSecrets(s, o)
	prog := progress.New(s.err, isTerminal(s.err))
	var res capture.Result
	err = interruptible(sayLine(s, prog.Clear, "Stopping: finishing the session file (Ctrl-C again to abort)"), sayLine(s, func() {}, "Aborted: nothing was written over "+o.out+"."),
		func(ctx context.Context) (err error) {
			res, err = capture.RecordPcap(ctx, in, capture.PcapOptions{
				Options:       capture.Options{Port: o.port, MaxBuffered: o.maxBuffered, MaxConns: o.maxConns, KeepSecrets: o.keepSecrets, KeyLog: keys},
				Output:        output(o, o.pcap, o.keylog),
				Tool:          "wtrace " + toolVersion(),
				Name:          name,
				CaptureSHA256: o.captureSHA256,
				Progress: func(read int64, st capture.Stats) {
					pct := ""
					if size > 0 {
						pct = fmt.Sprintf(" (%d%%)", read*100/size)
					}
					prog.Show("%s read%s  %d packets%s", units.Bytes(read), pct, st.Packets, counts(st))
				},
			})
			return err
		})
	prog.Clear()
	if errors.Is(err, pcapfile.ErrNotCapture) {
		return withHint(fmt.Errorf("%s is not a packet capture (pcap or pcapng)", name),
			"capture with: tcpdump -i lo -w capture.pcap tcp port 8001")
	}
	if err != nil {
		return recordError(err, name)
	}
	note := res.Note
	if res.ReadErr != nil {
		note = "" // said below
	}
	res.WriteSummary(s.err, name, "over "+time.Duration(res.Last-res.First).Round(time.Millisecond).String(),
		fmt.Sprintf("%d packets (%s)", res.Packets, units.Bytes(res.Bytes)), note)
	if res.TLSUndecrypted > 0 {
		hint := "pass the client's key log with --keylog (SSLKEYLOGFILE)"
		if o.keylog != "" {
			hint = "check that " + o.keylog + " was written by the clients of this capture, and that the capture holds their handshakes"
		}
		fmt.Fprintf(s.err, "Warning: %d of %d TLS connections could not be decrypted; 'wtrace inspect' lists them.\n  Try: %s\n",
			res.TLSUndecrypted, res.TLSConns, hint)
	}
	if res.ReadErr != nil {
		fmt.Fprintf(s.err, "Warning: %s: %v\n  Everything before that point was recorded; the rest of the file was not read.\n", name, res.ReadErr)
	}
	return nil
}

// output is where -o sends the session: a file, or stdout for "-", at
// the --compression level (none: the source's default, see
// capture.PcapWriterOptions and formats.WriterOptions), never over one of
// ins; with the limits of a live recording (validate checked the sizes).
func output(o *recordOptions, ins ...string) formats.FileSinkOptions {
	w := formats.WriterOptions{Level: int(compressionLevels[o.compression])}
	if o.blockSize != "" {
		n, _ := units.ParseSize(o.blockSize)
		w.BlockSize = int(n)
	}
	out := sessionOutput(o.s, o.out, w, ins...)
	if o.maxSize != "" {
		out.MaxSize, _ = units.ParseSize(o.maxSize)
	}
	out.MaxDuration, out.Rotate = o.maxDuration, o.rotate
	return out
}

// compressionLevels are the values of --compression.
var compressionLevels = map[string]zstd.EncoderLevel{
	"fastest": zstd.SpeedFastest,
	"default": zstd.SpeedDefault,
	"better":  zstd.SpeedBetterCompression,
	"best":    zstd.SpeedBestCompression,
}

// recordError explains an error of a recording: one of the session file
// (-o), or of the source, named src.
func recordError(err error, src string) error {
	var oe *formats.OutputError
	if errors.As(err, &oe) {
		return outputError(err, "-o")
	}
	return fmt.Errorf("%s: %w", src, err)
}

// warnKeepSecrets says what --keep-secrets means for the file.
func warnKeepSecrets(s streams, o *recordOptions) {
	if o.keepSecrets {
		fmt.Fprintln(s.err, "Warning: --keep-secrets: Secret values and tokens are stored as captured (credentials in headers and queries are not); treat the session file as a secret.")
	}
}
