package proxy

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
)

// DefaultShutdownGrace is the RecordOptions.ShutdownGrace a zero value
// means.
const DefaultShutdownGrace = 2 * time.Second

// RecordOptions configure Record. The zero value needs Output's Path (or
// Out); it serves plain HTTP/1.1, redacts Secret values and has no limits.
type RecordOptions struct {
	// Proxy configures the proxy: TLS, Certificate, Logger. Listen is not
	// used (Record serves on the listener it is given) and Tee is Record's.
	Proxy Options
	// Output is where the session goes: Path or Out, the Writer's options,
	// MaxSize, MaxDuration, Rotate, OnRotate. Record sets its Meta, Totals
	// and OnLimit: a limit reached without Rotate ends the recording.
	Output formats.FileSinkOptions
	// Tee configures the Tee: KeepSecrets, FlushInterval, OnTick (progress).
	Tee capture.TeeOptions
	// Tool names the recorder in Meta ("wtrace v0.3.0").
	Tool string
	// ShutdownGrace is how long the requests in flight may take to end
	// once the recording stops (Proxy.Shutdown): a watch at its next
	// event boundary, cleanly, a LIST or a create once it is answered;
	// what is left then is cut. 0 means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// OnStart, if set, is called once the proxy serves, with the proxy
	// (its URL and certificate) and the Tee recording it (its Stats).
	OnStart func(*Proxy, *capture.Tee)
	// Health, if set, serves the recording's /livez, /readyz, /healthz
	// and (with Metrics) /metrics — see ops.go — until Record returns,
	// which closes it. nil serves none.
	Health net.Listener
	// Metrics, if set, is the Prometheus registry the recording's
	// metrics (wtrace_proxy_*) are registered in, for one recording at a
	// time. nil means no metrics.
	Metrics *prometheus.Registry
}

// Record records what the apiserver of cl sends the proxy's clients into
// session files, end to end. It creates the proxy (New: its errors come
// before any file exists), creates the first session file with its Meta
// (formats.NewMeta, source proxy, "proxy ADDR → SERVER (context NAME)",
// labels context and server), and serves on ln, every client connection
// recorded by a Tee writing to the files. When ctx is done, a limit is
// reached (without Rotate) or writing fails, it shuts the proxy down
// (ShutdownGrace: every watch ends cleanly at an event boundary), closes
// the Tee (connections still open then end as cut by the recording) and
// the files, the last Summary noting why:
// context.Cause(ctx), "max-size reached", "writing failed: …". It closes
// ln. Errors of the session files are *formats.OutputError.
func Record(ctx context.Context, cl *Cluster, ln net.Listener, opts RecordOptions) (capture.Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	popts := opts.Proxy
	popts.Tee = nil
	p, err := New(cl.Config, popts)
	if err != nil {
		ln.Close()
		return capture.Result{}, err
	}
	out := opts.Output
	out.Meta = formats.NewMeta(opts.Tool, formats.SourceProxy,
		fmt.Sprintf("proxy %s → %s (context %s)", ln.Addr(), cl.Server, cl.Context), opts.Tee.KeepSecrets)
	out.Meta.Labels = map[string]string{"context": cl.Context, "server": cl.Server}
	out.OnLimit = func(l formats.Limit) { cancel(fmt.Errorf("%v reached", l)) }
	tf, err := capture.NewTeeFiles(out, opts.Tee)
	if err != nil {
		ln.Close()
		return capture.Result{}, err
	}
	tee := tf.Tee
	p.opts.Tee = tee
	if err := p.Serve(ln); err != nil {
		tf.Close("proxy failed: " + err.Error())
		return capture.Result{}, err
	}
	ops, err := serveOps(opts, p, tee)
	if err != nil {
		p.Close()
		tf.Close("proxy failed: " + err.Error())
		return capture.Result{}, err
	}
	defer ops.stop()
	if opts.OnStart != nil {
		opts.OnStart(p, tee)
	}
	select {
	case <-ctx.Done():
	case <-tee.Done():
		cancel(fmt.Errorf("writing failed: %w", tee.Err()))
	}
	ops.drain()
	grace := opts.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	sctx, scancel := context.WithTimeout(context.Background(), grace)
	p.Shutdown(sctx)
	scancel()
	return tf.Close(context.Cause(ctx).Error())
}
