package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/live"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/formats"
)

// shutdownGrace is how long the first Ctrl-C lets proxied requests finish
// before open connections (watches) are cut.
const shutdownGrace = 2 * time.Second

// validate checks the flag combination: exactly one source, and only the
// flags that source takes.
func (o *recordOptions) validate(c *cobra.Command) error {
	usage := func(format string, a ...any) error {
		return &usageError{fmt.Errorf(format+"\nSee 'wtrace record --help'.", a...)}
	}
	n := 0
	for _, set := range []bool{o.pcap != "", o.iface != "", o.proxy} {
		if set {
			n++
		}
	}
	if n != 1 {
		return usage("give exactly one source: --pcap FILE, --iface NAME or --proxy")
	}
	if o.out == "" {
		return usage("-o OUT.wt is required")
	}
	changed := func(names ...string) string {
		for _, name := range names {
			if c.Flags().Changed(name) {
				return name
			}
		}
		return ""
	}
	if name := changed("host", "pcap-out"); name != "" && o.iface == "" {
		return usage("--%s goes with --iface", name)
	}
	if name := changed("listen", "kubeconfig", "context", "tls"); name != "" && !o.proxy {
		return usage("--%s goes with --proxy", name)
	}
	if o.keylog != "" && o.pcap == "" {
		// A live capture would read keys the clients write during their
		// handshakes too late: TLS 1.3 encrypts right after ServerHello.
		return usage("--keylog goes with --pcap; to record a cluster that speaks TLS live, use --proxy")
	}
	if name := changed("port", "max-buffered"); name != "" && o.proxy {
		return usage("--%s does not apply to --proxy (it records what clients send it; see --listen)", name)
	}
	if name := changed("max-duration", "max-size", "rotate"); name != "" && o.pcap != "" {
		return usage("--%s applies to live recordings (--iface, --proxy) only", name)
	}
	if o.port < 0 || o.port > 65535 {
		return usage("--port %d: not a TCP port", o.port)
	}
	if o.maxDuration < 0 {
		return usage("--max-duration %s: must be positive", o.maxDuration)
	}
	if o.maxSize != "" {
		if _, err := parseSize(o.maxSize); err != nil {
			return usage("--max-size: %v", err)
		}
	}
	if o.rotate && o.maxSize == "" && o.maxDuration == 0 {
		return usage("--rotate needs --max-size or --max-duration")
	}
	if o.rotate && o.out == "-" {
		return usage("--rotate writes numbered files: -o must name a file")
	}
	if o.pcapOut != "" && (o.pcapOut == o.out || o.pcapOut == "-" && o.out == "-") {
		return usage("--pcap-out and -o must differ")
	}
	return nil
}

// parseSize parses a size: a number with an optional unit, decimal (k, KB,
// M, MB, G, GB, T, TB) or binary (Ki, KiB, Mi, MiB, Gi, GiB, Ti, TiB),
// case-insensitive; B or nothing means bytes.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a size (examples: 500MB, 2GiB, 1048576)", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, t[i:])
	}
	n := v * mult
	if n < 1 || n > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return int64(n), nil
}

// liveRun is what the two live sources share: the output files, signals,
// limits, progress and the summary.
type liveRun struct {
	s      streams
	o      *recordOptions
	fs     *capture.FileSink
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time

	mu     sync.Mutex
	reason string // why the recording stopped
	prog   *liveProgress
}

// newLiveRun creates the output and starts listening for signals. meta
// describes the session; counters feed each file's Summary.
func newLiveRun(s streams, o *recordOptions, meta formats.Meta, counters func() (int64, int64)) (*liveRun, error) {
	r := &liveRun{s: s, o: o, start: time.Now()}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	host, _ := os.Hostname()
	meta.Tool = "wtrace " + toolVersion()
	meta.Recorded = r.start.UnixNano()
	meta.Host = host
	meta.Redaction = "default"
	if o.keepSecrets {
		meta.Redaction = "headers-only"
		fmt.Fprintln(s.err, "Warning: --keep-secrets: Secret values are stored as captured; treat the session file as a secret.")
	}
	var maxSize int64
	if o.maxSize != "" {
		maxSize, _ = parseSize(o.maxSize)
	}
	opts := capture.FileSinkOptions{
		Path: o.out, Meta: meta, MaxSize: maxSize, MaxDuration: o.maxDuration, Rotate: o.rotate, Counters: counters,
		OnLimit: func(reason string) {
			r.stop(reason + " reached")
		},
		OnRotate: func(finished, next string) {
			r.prog.clear()
			fmt.Fprintf(s.err, "Finished %s; recording into %s\n", finished, next)
		},
	}
	if o.out == "-" {
		opts.Path, opts.Out = "", s.out
	}
	sink, err := capture.NewFileSink(opts)
	if err != nil {
		return nil, withHint(err, "check that the directory of -o exists and is writable")
	}
	r.fs = sink
	r.prog = newLiveProgress(s.err, r.start, sink)
	// First Ctrl-C (or SIGTERM): finish cleanly. Second: abort.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
		case <-r.ctx.Done():
			signal.Stop(sig)
			return
		}
		r.prog.clear()
		fmt.Fprintln(s.err, "Stopping: finishing the session file (Ctrl-C again to abort)")
		r.stop("stopped by the user")
		<-sig
		fmt.Fprintln(s.err, "Aborted: the session file is readable up to its last complete block.")
		os.Exit(1)
	}()
	return r, nil
}

// stop ends the recording (the first reason wins).
func (r *liveRun) stop(reason string) {
	r.mu.Lock()
	if r.reason == "" {
		r.reason = reason
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *liveRun) why() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

// finish closes the output with the stop reason as the Summary's note.
func (r *liveRun) finish() error {
	r.prog.clear()
	note := r.why()
	if err := r.fs.Close(note); err != nil {
		return fmt.Errorf("writing %s: %w", r.o.out, err)
	}
	return nil
}

// outputs describes the files written, for the summary paragraph.
func (r *liveRun) outputs() string {
	names := r.fs.Names()
	size := humanBytes(r.fs.Size())
	if len(names) == 1 {
		return fmt.Sprintf("Session file: %s (%s).", names[0], size)
	}
	return fmt.Sprintf("Session files: %s … %s (%d files, %s in all).", names[0], names[len(names)-1], len(names), size)
}

// liveProgress shows a one-line status on a terminal.
type liveProgress struct {
	w     io.Writer
	start time.Time
	fs    *capture.FileSink
	mu    sync.Mutex
	shown bool
}

func newLiveProgress(w io.Writer, start time.Time, fs *capture.FileSink) *liveProgress {
	if !isTerminal(w) {
		return nil
	}
	return &liveProgress{w: w, start: start, fs: fs}
}

func (p *liveProgress) update(st capture.Stats, what string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K%s  %s  %d connections  %d exchanges  %d events  %s written",
		time.Since(p.start).Round(time.Second), what, st.Conns, st.Exchanges, st.Events, humanBytes(p.fs.Size()))
	p.shown = true
}

func (p *liveProgress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// resolveHosts turns --host values (addresses or names) into addresses.
func resolveHosts(hosts []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			out = append(out, a.Unmap())
			continue
		}
		ips, err := net.LookupIP(h)
		if err != nil {
			return nil, withHint(fmt.Errorf("--host %s: %w", h, err), "give an IP address, e.g. --host 127.0.0.1")
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	if len(out) > live.MaxHosts {
		return nil, &usageError{fmt.Errorf("--host: %d addresses; at most %d", len(out), live.MaxHosts)}
	}
	return out, nil
}

// liveError explains why a live capture could not start.
func liveError(err error, iface string) error {
	switch {
	case errors.Is(err, live.ErrPermission):
		return withHint(err, "run as root, or sudo setcap cap_net_raw+ep $(command -v wtrace), or capture with tcpdump and use --pcap")
	case errors.Is(err, live.ErrUnsupported):
		return withHint(err, "capture with tcpdump -w capture.pcap and use --pcap, or record with --proxy")
	case errors.Is(err, live.ErrNoInterface):
		return withHint(err, "list the interfaces with: ip link")
	case errors.Is(err, live.ErrLinkType):
		return withHint(err, "capture with tcpdump -i %s -w capture.pcap and use --pcap", iface)
	}
	return err
}

func runRecordIface(s streams, o *recordOptions) error {
	hosts, err := resolveHosts(o.hosts)
	if err != nil {
		return err
	}
	filter := live.Filter{Port: o.port, Hosts: hosts}
	h, err := live.Open(o.iface, live.Options{Filter: filter})
	if err != nil {
		return liveError(err, o.iface)
	}
	defer h.Close()

	var pcapW *pcapgo.Writer
	var pcapBuf *bufio.Writer
	var pcapFile *os.File
	if o.pcapOut != "" {
		if o.pcapOut == "-" {
			pcapBuf = bufio.NewWriterSize(s.out, 1<<20)
		} else {
			if pcapFile, err = os.Create(o.pcapOut); err != nil {
				return withHint(err, "check that the directory of --pcap-out exists and is writable")
			}
			defer pcapFile.Close()
			pcapBuf = bufio.NewWriterSize(pcapFile, 1<<20)
		}
		pcapW = pcapgo.NewWriterNanos(pcapBuf)
		if err := pcapW.WriteFileHeader(uint32(h.SnapLen()), layers.LinkTypeEthernet); err != nil {
			return fmt.Errorf("writing %s: %w", o.pcapOut, err)
		}
	}

	var packets, bytesRead int64 // owned by the recording goroutine (this one)
	desc := "iface " + o.iface
	if f := filter.String(); f != "tcp" {
		desc += " (" + f + ")"
	}
	meta := formats.Meta{Source: "iface", Description: desc, Labels: map[string]string{"filter": filter.String()}}
	if o.pcapOut != "" && o.pcapOut != "-" {
		meta.CaptureFile = filepath.Base(o.pcapOut)
	}
	r, err := newLiveRun(s, o, meta, func() (int64, int64) { return packets, bytesRead })
	if err != nil {
		return err
	}
	rec := capture.NewRecorder(r.fs, capture.Options{Port: o.port, MaxBuffered: o.maxBuffered, KeepSecrets: o.keepSecrets})
	fmt.Fprintf(s.err, "Capturing on %s (%s); Ctrl-C to finish.\n", o.iface, filter)
	runErr := live.Run(r.ctx, h, rec, live.RunOptions{
		Flush: func() error {
			if pcapBuf != nil {
				if err := pcapBuf.Flush(); err != nil {
					return fmt.Errorf("writing %s: %w", o.pcapOut, err)
				}
			}
			return r.fs.Flush()
		},
		Packet: func(p pcapfile.Packet) error {
			packets++
			bytesRead += int64(len(p.Data))
			if pcapW == nil {
				return nil
			}
			ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.Time), CaptureLength: len(p.Data), Length: p.Length}
			if err := pcapW.WritePacket(ci, p.Data); err != nil {
				return fmt.Errorf("writing %s: %w", o.pcapOut, err)
			}
			return nil
		},
		OnTick: func(st capture.Stats) { r.prog.update(st, fmt.Sprintf("%d packets", st.Packets)) },
	})
	r.cancel()
	closeErr := rec.Close()
	st := rec.Stats()
	kst, _ := h.Stats()
	if runErr != nil {
		r.stop("capture failed: " + runErr.Error())
	}
	if err := r.finish(); err != nil {
		return err
	}
	if pcapBuf != nil {
		if err := pcapBuf.Flush(); err != nil {
			return fmt.Errorf("writing %s: %w", o.pcapOut, err)
		}
		if pcapFile != nil {
			if err := pcapFile.Close(); err != nil {
				return fmt.Errorf("writing %s: %w", o.pcapOut, err)
			}
		}
	}
	if runErr != nil {
		return fmt.Errorf("capturing on %s: %w", o.iface, runErr)
	}
	if closeErr != nil {
		return fmt.Errorf("writing %s: %w", o.out, closeErr)
	}
	fmt.Fprintf(s.err, "Recorded %s (%s) for %s: %d packets (%s); %d connections, %d exchanges, %d watch events",
		o.iface, filter, time.Since(r.start).Round(time.Millisecond), st.Packets, humanBytes(st.Bytes), st.Conns, st.Exchanges, st.Events)
	if st.Anomalies > 0 {
		fmt.Fprintf(s.err, ", %d anomalies (see 'wtrace inspect')", st.Anomalies)
	}
	fmt.Fprintf(s.err, "; %s. %s\n", r.why(), r.outputs())
	if kst.Dropped > 0 {
		fmt.Fprintf(s.err, "Warning: the kernel dropped %d packets that wtrace did not read in time; the session has gaps where they were.\n  Try: narrow the capture with --port and --host\n", kst.Dropped)
	}
	if st.TLSUndecrypted > 0 {
		fmt.Fprintf(s.err, "Warning: %d TLS connections could not be decrypted; 'wtrace inspect' lists them.\n  Try: record with --proxy, or capture with tcpdump while the clients write SSLKEYLOGFILE and use --pcap --keylog\n",
			st.TLSUndecrypted)
	}
	return nil
}

// kubeconfigError explains why the kubeconfig could not be used.
func kubeconfigError(err error, o *recordOptions) error {
	where := "~/.kube/config (or $KUBECONFIG)"
	if o.kubeconfig != "" {
		where = o.kubeconfig
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withHint(err, "check the path given to --kubeconfig (or in $KUBECONFIG)")
	case errors.Is(err, proxy.ErrNoKubeconfig):
		return withHint(fmt.Errorf("no kubeconfig at %s", where), "point --kubeconfig at one, or set KUBECONFIG")
	case errors.Is(err, proxy.ErrNoContext):
		return withHint(fmt.Errorf("the kubeconfig %s has no current context", where), "choose one with --context NAME (kubectl config get-contexts lists them)")
	case errors.Is(err, proxy.ErrContextNotFound):
		return withHint(err, "list the contexts of %s with: kubectl config get-contexts", where)
	}
	return withHint(err, "check the kubeconfig with: kubectl config view --minify")
}

// listenError explains why the proxy cannot listen.
func listenError(err error, addr string) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return withHint(fmt.Errorf("%s is in use: %w", addr, err), "another process listens there (kubectl proxy?); pick another address with --listen 127.0.0.1:8002")
	case errors.Is(err, syscall.EACCES):
		return withHint(err, "ports below 1024 need privileges; pick another with --listen 127.0.0.1:8001")
	}
	return withHint(err, "check the --listen address (host:port, e.g. 127.0.0.1:8001)")
}

func runRecordProxy(s streams, o *recordOptions) error {
	cl, err := proxy.LoadConfig(o.kubeconfig, o.context)
	if err != nil {
		return kubeconfigError(err, o)
	}
	// Check the credentials' configuration (certificate files, exec
	// plugin settings) before creating the output.
	if _, err := rest.TransportFor(cl.Config); err != nil {
		return kubeconfigError(fmt.Errorf("kubeconfig context %s: %w", cl.Context, err), o)
	}
	listen := o.listen
	if listen == "" {
		listen = proxy.DefaultListen
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return listenError(err, listen)
	}
	var tee *capture.Tee
	meta := formats.Meta{Source: "proxy", Description: fmt.Sprintf("proxy %s → %s (context %s)", ln.Addr(), cl.Server, cl.Context),
		Labels: map[string]string{"context": cl.Context, "server": cl.Server}}
	r, err := newLiveRun(s, o, meta, func() (int64, int64) {
		if tee == nil { // the first file is opened before the tee exists
			return 0, 0
		}
		return 0, tee.Stats().Bytes
	})
	if err != nil {
		ln.Close()
		return err
	}
	tee = capture.NewTee(r.fs, capture.TeeOptions{
		KeepSecrets: o.keepSecrets,
		OnTick:      func(st capture.Stats) { r.prog.update(st, humanBytes(st.Bytes)+" proxied") },
	})
	logger := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := proxy.New(cl.Config, proxy.Options{Listen: listen, TLS: o.tls, Tee: tee, Logger: logger})
	if err == nil {
		err = p.Serve(ln)
	}
	if err != nil {
		ln.Close()
		tee.Close()
		r.stop("proxy failed")
		r.finish()
		return withHint(err, "check the kubeconfig with: kubectl config view --minify")
	}
	fmt.Fprintf(s.err, "Proxying %s → %s (context %s), recording to %s; Ctrl-C to finish.\n", p.URL, cl.Server, cl.Context, o.out)
	if pemBytes := p.CertPEM(); pemBytes != nil {
		certPath := filepath.Join(os.TempDir(), fmt.Sprintf("wtrace-proxy-%d.crt", os.Getpid()))
		if err := os.WriteFile(certPath, pemBytes, 0o644); err == nil {
			fmt.Fprintf(s.err, "  The proxy's certificate is in %s:\n  kubectl --server %s --certificate-authority %s get pods -A -w\n", certPath, p.URL, certPath)
			defer os.Remove(certPath)
		}
	} else {
		fmt.Fprintf(s.err, "  kubectl --server %s get pods -A -w\n", p.URL)
	}
	// Stop on Ctrl-C or a limit; a broken output stops too.
	check := time.NewTicker(time.Second)
	defer check.Stop()
wait:
	for {
		select {
		case <-r.ctx.Done():
			break wait
		case <-check.C:
			if err := tee.Err(); err != nil {
				r.stop("writing failed: " + err.Error())
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	p.Shutdown(ctx)
	cancel()
	teeErr := tee.Close()
	st := tee.Stats()
	if err := r.finish(); err != nil {
		return err
	}
	if teeErr != nil {
		return fmt.Errorf("writing %s: %w", o.out, teeErr)
	}
	fmt.Fprintf(s.err, "Recorded proxy %s → %s for %s: %s proxied; %d connections, %d exchanges, %d watch events",
		p.URL, cl.Server, time.Since(r.start).Round(time.Millisecond), humanBytes(st.Bytes), st.Conns, st.Exchanges, st.Events)
	if st.Anomalies > 0 {
		fmt.Fprintf(s.err, ", %d anomalies (see 'wtrace inspect')", st.Anomalies)
	}
	fmt.Fprintf(s.err, "; %s. %s\n", r.why(), r.outputs())
	return nil
}
