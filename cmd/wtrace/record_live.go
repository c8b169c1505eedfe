package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/live"
	"github.com/wtrace/wtrace/capture/proxy"
	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/healthz"
	"github.com/wtrace/wtrace/internal/hostfilter"
	"github.com/wtrace/wtrace/internal/progress"
	"github.com/wtrace/wtrace/internal/units"
)

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
	if o.captureSHA256 && o.pcap == "" {
		return usage("--capture-sha256 goes with --pcap (live and proxy recordings have no capture file)")
	}
	if name := changed("listen", "kubeconfig", "context", "tls", "accept-hosts", "reject-paths", "health-listen", "metrics", "log-format", "shutdown-grace"); name != "" && !o.proxy {
		return usage("--%s goes with --proxy", name)
	}
	if err := checkLogFormat(o.logFormat); err != nil {
		return err
	}
	if o.shutdownGrace < 0 {
		return usage("--shutdown-grace %v: must be 0 or more", o.shutdownGrace)
	}
	if o.keylog != "" && o.proxy {
		return usage("--keylog goes with --pcap or --iface; the proxy decrypts TLS itself")
	}
	if name := changed("port", "max-buffered", "max-conns"); name != "" && o.proxy {
		return usage("--%s does not apply to --proxy (it records what clients send it; see --listen)", name)
	}
	if name := changed("max-duration", "max-size", "rotate"); name != "" && o.pcap != "" {
		return usage("--%s applies to live recordings (--iface, --proxy) only", name)
	}
	if v := o.memLimit; v != "" && v != "0" {
		if n, err := units.ParseSize(v); err != nil || n <= 0 {
			return usage("--memory-limit %s: not a size (192MiB, 1GiB; 0 for none)", v)
		}
	}
	if o.maxConns < 1 {
		return usage("--max-conns %d: must be at least 1", o.maxConns)
	}
	if v := o.blockSize; v != "" {
		if n, err := units.ParseSize(v); err != nil || n < 16<<10 || n > formats.MaxBlockSize {
			return usage("--block-size %s: a size from 16KiB to 64MiB (256KiB, 4MiB)", v)
		}
	}
	if _, ok := compressionLevels[o.compression]; !ok && o.compression != "" {
		return usage("--compression %s: one of fastest, default, better, best", o.compression)
	}
	if o.port < 0 || o.port > 65535 {
		return usage("--port %d: not a TCP port", o.port)
	}
	if o.maxDuration < 0 {
		return usage("--max-duration %s: must be positive", o.maxDuration)
	}
	if o.maxSize != "" {
		if _, err := units.ParseSize(o.maxSize); err != nil {
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
	if _, err := hostfilter.New(hostfilter.Split(o.acceptHosts), hostfilter.Split(o.rejectPaths)); err != nil {
		return usage("%v", strings.TrimPrefix(err.Error(), "hostfilter: "))
	}
	return nil
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

func runRecordIface(o *recordOptions) error {
	s := o.s
	if err := noOverwrite([]string{o.out, o.pcapOut}, o.keylog); err != nil {
		return err
	}
	hosts, err := live.ResolveHosts(o.hosts)
	if err != nil {
		return withHint(&usageError{fmt.Errorf("--host: %w", err)}, "give at most %d IP addresses, e.g. --host 127.0.0.1", live.MaxHosts)
	}
	recOpts := capture.Options{Port: o.port, MaxBuffered: o.maxBuffered, MaxConns: o.maxConns, KeepSecrets: o.keepSecrets}
	if o.keylog != "" {
		// A key log the clients are still writing: TLS connections wait
		// for their secrets while it is re-read.
		kf, err := tlsdec.OpenKeyLogFile(o.keylog)
		if err != nil {
			return withHint(err, "create it first (touch %s) and start the clients with SSLKEYLOGFILE=%s", o.keylog, o.keylog)
		}
		recOpts.KeyLog, recOpts.KeyLogSource = kf.KeyLog(), kf
	}

	filter := live.Filter{Port: o.port, Hosts: hosts}
	h, err := live.Open(o.iface, live.Options{Filter: filter})
	if err != nil {
		return liveError(err, o.iface)
	}
	defer h.Close()
	var pcapOut *bufio.Writer
	var pcapFile *os.File
	if o.pcapOut != "" {
		w := s.out
		if o.pcapOut != "-" {
			if pcapFile, err = os.Create(o.pcapOut); err != nil {
				return withHint(err, "check that the directory of --pcap-out exists and is writable")
			}
			defer pcapFile.Close()
			w = pcapFile
		}
		pcapOut = bufio.NewWriterSize(w, 1<<20)
	}
	warnKeepSecrets(s, o)
	prog := progress.New(s.err, isTerminal(s.err))
	fmt.Fprintf(s.err, "Capturing on %s (%s); Ctrl-C to finish.\n", o.iface, filter)
	start := time.Now()
	opts := live.RecordOptions{
		Output:   output(o, o.keylog, o.pcapOut),
		Recorder: recOpts,
		Tool:     "wtrace " + toolVersion(),
		OnTick: func(st capture.Stats) {
			prog.Show("%s  %d packets%s", time.Since(start).Round(time.Second), st.Packets, counts(st))
		},
	}
	opts.Output.OnRotate = rotated(s, prog)
	if pcapOut != nil {
		opts.PcapOut = pcapOut
		if o.pcapOut != "-" {
			opts.PcapOutName = o.pcapOut
		}
	}
	var res capture.Result
	err = interruptible(sayLine(s, prog.Clear, "Stopping: finishing the session file (Ctrl-C again to abort)"), sayLine(s, func() {}, abortedLive),
		func(ctx context.Context) (err error) {
			res, err = live.Record(ctx, h, opts)
			return err
		})
	prog.Clear()
	if pcapFile != nil {
		if cerr := pcapFile.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("writing %s: %w", o.pcapOut, cerr)
		}
	}
	if err != nil {
		return recordError(err, "--iface "+o.iface)
	}
	res.WriteSummary(s.err, fmt.Sprintf("%s (%s)", o.iface, filter), "for "+time.Since(start).Round(time.Millisecond).String(),
		fmt.Sprintf("%d packets (%s)", res.Packets, units.Bytes(res.Bytes)), res.Note)
	if res.Dropped > 0 {
		fmt.Fprintf(s.err, "Warning: the kernel dropped %d packets that wtrace did not read in time; the session has gaps where they were.\n  Try: narrow the capture with --port and --host\n", res.Dropped)
	}
	if res.TLSUndecrypted > 0 {
		hint := "record with --proxy, or start the clients with SSLKEYLOGFILE=keys.log and record with --keylog keys.log"
		if o.keylog != "" {
			hint = "check that the clients write " + o.keylog + " (SSLKEYLOGFILE) and that their connections began after the capture"
		}
		fmt.Fprintf(s.err, "Warning: %d TLS connections could not be decrypted; 'wtrace inspect' lists them.\n  Try: %s\n", res.TLSUndecrypted, hint)
	}
	return nil
}

// abortedLive is what a second Ctrl-C says of a live recording.
const abortedLive = "Aborted: the session file is readable up to its last complete block."

// rotated reports each new part of a rotated recording.
func rotated(s streams, prog *progress.Line) func(finished, next string) {
	return func(finished, next string) {
		prog.Clear()
		fmt.Fprintf(s.err, "Finished %s; recording into %s\n", finished, next)
	}
}

// counts is the progress line's tail: what the recording holds so far.
func counts(st capture.Stats) string {
	return fmt.Sprintf("  %d connections  %d exchanges  %d events", st.Conns, st.Exchanges, st.Events)
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

func runRecordProxy(o *recordOptions) error {
	s := o.s
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	kubeconfigs := rules.GetLoadingPrecedence()
	if err := noOverwrite([]string{o.out}, kubeconfigs...); err != nil {
		return err
	}
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
	logger := newLogger(s, o.logFormat, slog.LevelWarn)
	var health net.Listener
	if o.healthListen != "" {
		if health, err = net.Listen("tcp", o.healthListen); err != nil {
			ln.Close()
			return listenError(err, o.healthListen)
		}
	}
	warnKeepSecrets(s, o)
	prog := progress.New(s.err, isTerminal(s.err))
	start := time.Now()
	var url, certPath string
	opts := proxy.RecordOptions{
		Proxy: proxy.Options{TLS: o.tls, Logger: logger,
			AcceptHosts: hostfilter.Split(o.acceptHosts), RejectPaths: hostfilter.Split(o.rejectPaths)},
		Health: health,
		Output: output(o, kubeconfigs...),
		Tee: capture.TeeOptions{KeepSecrets: o.keepSecrets, OnTick: func(st capture.Stats) {
			prog.Show("%s  %s proxied%s", time.Since(start).Round(time.Second), units.Bytes(st.Bytes), counts(st))
		}},
		Tool:          "wtrace " + toolVersion(),
		ShutdownGrace: o.shutdownGrace,
		OnStart: func(p *proxy.Proxy, _ *capture.Tee) {
			url = p.URL
			fmt.Fprintf(s.err, "Proxying %s → %s (context %s), recording to %s; Ctrl-C to finish.\n", p.URL, cl.Server, cl.Context, o.out)
			if path, err := p.WriteCertFile(); path == "" {
				fmt.Fprintf(s.err, "  kubectl --server %s get pods -A -w\n", p.URL)
			} else if err == nil {
				certPath = path
				fmt.Fprintf(s.err, "  The proxy's certificate is in %s:\n  kubectl --server %s --certificate-authority %s get pods -A -w\n", path, p.URL, path)
			}
		},
	}
	if health != nil && o.metrics {
		opts.Metrics = healthz.NewRegistry()
	}
	opts.Output.OnRotate = rotated(s, prog)
	var res capture.Result
	err = interruptible(sayLine(s, prog.Clear, "Stopping: finishing the session file (Ctrl-C again to abort)"), sayLine(s, func() {}, abortedLive),
		func(ctx context.Context) (err error) {
			res, err = proxy.Record(ctx, cl, ln, opts)
			return err
		})
	prog.Clear()
	if certPath != "" {
		os.Remove(certPath)
	}
	var oe *formats.OutputError
	switch {
	case errors.As(err, &oe):
		return recordError(err, "--proxy")
	case err != nil:
		return withHint(err, "check the kubeconfig with: kubectl config view --minify")
	}
	res.WriteSummary(s.err, fmt.Sprintf("proxy %s → %s", url, cl.Server), "for "+time.Since(start).Round(time.Millisecond).String(),
		units.Bytes(res.Bytes)+" proxied", res.Note)
	return nil
}
