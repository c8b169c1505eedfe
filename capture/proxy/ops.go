package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/internal/healthz"
)

// A recording's operational endpoints (RecordOptions.Health): /livez,
// /readyz and /healthz as kube-apiserver answers them (package
// internal/healthz), and /metrics when RecordOptions.Metrics is set. They
// are served on a listener of their own: on the proxy's port every path
// is the apiserver's (a client asking for /readyz through the proxy gets
// the apiserver's answer, recorded like any other).
//
//	livez    ping
//	readyz   ping, recording (the session file is being written), shutdown
//	healthz  ping, recording
//
// The metrics (wtrace_proxy_*) are read from the Tee when scraped.

var (
	errRecordingFailed = errors.New("writing the session failed")
	errStopping        = errors.New("the recording is stopping")
)

// recordOps serves a recording's endpoints on ln until stop.
type recordOps struct {
	stopping atomic.Bool
	srv      *http.Server
	done     chan struct{}
}

// serveOps starts the endpoints of the recording by p and tee on
// opts.Health (nothing when it is nil), and registers the recording's
// metrics in opts.Metrics (if set).
func serveOps(opts RecordOptions, p *Proxy, tee *capture.Tee) (*recordOps, error) {
	o := &recordOps{done: make(chan struct{})}
	if opts.Metrics != nil {
		if err := opts.Metrics.Register(&teeCollector{p: p, tee: tee}); err != nil {
			if opts.Health != nil {
				opts.Health.Close()
			}
			return nil, err
		}
	}
	if opts.Health == nil {
		close(o.done)
		return o, nil
	}
	recording := healthz.Check{Name: "recording", Func: func() error {
		select {
		case <-tee.Done():
			return errRecordingFailed
		default:
			return nil
		}
	}}
	shutdown := healthz.Check{Name: "shutdown", Func: func() error {
		if o.stopping.Load() {
			return errStopping
		}
		return nil
	}}
	ep := &healthz.Endpoints{
		Livez:   []healthz.Check{healthz.Ping},
		Readyz:  []healthz.Check{healthz.Ping, recording, shutdown},
		Healthz: []healthz.Check{healthz.Ping, recording},
		Metrics: opts.Metrics,
		Logger:  opts.Proxy.Logger,
	}
	log := opts.Proxy.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o.srv = &http.Server{Handler: ep, ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		defer close(o.done)
		_ = o.srv.Serve(opts.Health)
	}()
	return o, nil
}

// drain makes /readyz fail (the recording is stopping).
func (o *recordOps) drain() { o.stopping.Store(true) }

// stop closes the endpoints' listener and connections.
func (o *recordOps) stop() {
	if o.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if o.srv.Shutdown(ctx) != nil {
			o.srv.Close()
		}
	}
	<-o.done
}

// teeCollector reports a recording's Tee statistics and the proxy's
// requests in flight, read when scraped.
type teeCollector struct {
	p   *Proxy
	tee *capture.Tee
}

const proxyNamespace = "wtrace_proxy"

var (
	descBytes      = prometheus.NewDesc(proxyNamespace+"_recorded_bytes_total", "Bytes the proxy read from and wrote to its clients, handed to the recording.", nil, nil)
	descConns      = prometheus.NewDesc(proxyNamespace+"_connections_recorded_total", "Client connections recorded.", nil, nil)
	descExchanges  = prometheus.NewDesc(proxyNamespace+"_exchanges_recorded_total", "HTTP exchanges recorded.", nil, nil)
	descEvents     = prometheus.NewDesc(proxyNamespace+"_watch_events_recorded_total", "Watch events recorded.", nil, nil)
	descRedactions = prometheus.NewDesc(proxyNamespace+"_redactions_total", "Values redaction replaced (Secret values, tokens; credentials in headers are removed and not counted).", nil, nil)
	descAnomalies  = prometheus.NewDesc(proxyNamespace+"_anomalies_total", "Anomalies recorded (what the recording could not parse, cut streams, …: see wtrace inspect).", nil, nil)
	descInFlight   = prometheus.NewDesc(proxyNamespace+"_requests_in_flight", "Requests the proxy is forwarding, watches apart from the others.", []string{"kind"}, nil)
	descFailed     = prometheus.NewDesc(proxyNamespace+"_recording_failed", "1 once writing the session failed (the proxy goes on, unrecorded).", nil, nil)
)

func (c *teeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBytes, descConns, descExchanges, descEvents, descRedactions, descAnomalies, descInFlight, descFailed} {
		ch <- d
	}
}

func (c *teeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.tee.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v int64
	}{{descBytes, st.Bytes}, {descConns, st.Conns}, {descExchanges, st.Exchanges}, {descEvents, st.Events},
		{descRedactions, st.Redactions}, {descAnomalies, st.Anomalies}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	c.p.mu.Lock()
	active, short := c.p.active, c.p.short
	c.p.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(active-short), "watch")
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(short), "other")
	failed := 0.0
	if c.tee.Err() != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, failed)
}
