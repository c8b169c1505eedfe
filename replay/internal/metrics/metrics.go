package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/internal/healthz"
)

// Metric names and the help text operators see.
const (
	metricNamespace = "wtrace_replay"
	// maxResourceLabels bounds the distinct resource label values (a
	// client can ask for any path): past it, "other".
	maxResourceLabels = 100
)

// LatenessBuckets are the upper bounds (seconds) of the event lateness
// histogram: 100 µs to 10 s, about three a decade.
var LatenessBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics are a replay server's collectors, registered in its registry
// (shared with the other servers of that registry). Safe for concurrent
// use; nil means no metrics.
type Metrics struct {
	watchers   prometheus.Gauge
	conns      prometheus.Gauge
	connsTotal prometheus.Counter
	requests   *prometheus.CounterVec
	eventsSent prometheus.Counter
	bytes      prometheus.Counter
	lateness   prometheus.Histogram
	writes     *prometheus.CounterVec
	sessions   prometheus.Counter
	info       *prometheus.GaugeVec

	mu        sync.Mutex
	resources map[string]bool // resource label values in use
}

// New registers the replay's metrics in reg; nil without one.
func New(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{resources: map[string]bool{}}
	m.watchers = healthz.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricNamespace, Name: "watchers",
		Help: "Watch requests being served (open watch streams)."}))
	m.conns = healthz.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricNamespace, Name: "connections",
		Help: "Client connections open, including those a watch stream took over from net/http."}))
	m.connsTotal = healthz.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricNamespace, Name: "connections_total",
		Help: "Client connections accepted."}))
	m.requests = healthz.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricNamespace, Name: "requests_total",
		Help: "Requests answered, by Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection; the HTTP method in lower case for other paths), API group, resource, subresource, status code, how they were answered (recorded, resumed, synth-*, after-last, expired, not-found, rejected, …: the how= of the log) and why the bytes are not the recorded ones (transcoded: json→protobuf, Table, rv, writes, …; empty when they are). Counted when the answer is over (a watch when it ends). The replay's own /livez, /readyz, /healthz and /metrics are not counted."},
		[]string{"verb", "group", "resource", "subresource", "code", "how", "transcoded"}))
	m.eventsSent = healthz.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricNamespace, Name: "watch_events_sent_total",
		Help: "Watch events handed to client connections (recorded, synthesized and the clients' own writes), summed over every watcher."}))
	m.bytes = healthz.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricNamespace, Name: "sent_bytes_total",
		Help: "Response bytes handed to client connections (through net/http: body bytes; on a connection a watch took over: with the chunk framing)."}))
	m.lateness = healthz.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricNamespace, Name: "event_lateness_seconds",
		Help:    "How late each watch event with a recorded time went out against its schedule (request arrival + recorded offset / speed). Not observed at speed 0 (no schedule), nor for synthesized initial events and the clients' writes.",
		Buckets: LatenessBuckets}))
	m.writes = healthz.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricNamespace, Name: "writes_applied_total",
		Help: "Writes (create, update, patch, delete, deletecollection) answered with success, dry runs left out, by verb, API group and resource."},
		[]string{"verb", "group", "resource"}))
	m.sessions = healthz.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricNamespace, Name: "sessions_loaded_total",
		Help: "Sessions opened and loaded (their index read, checksums checked, their world loaded)."}))
	m.info = healthz.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricNamespace, Name: "session_info",
		Help: "1 for each session served: its writes mode and speed."}, []string{"writes", "speed"}))
	return m
}

// Loaded notes that a server loaded its session, served with writes mode
// writes at speed.
func (m *Metrics) Loaded(writes string, speed float64) {
	if m == nil {
		return
	}
	m.sessions.Inc()
	m.info.WithLabelValues(writes, strconv.FormatFloat(speed, 'g', -1, 64)).Set(1)
}

// Opened notes request r arriving.
func (m *Metrics) Opened(r apipath.Request) {
	if m == nil {
		return
	}
	if r.Verb == "watch" {
		m.watchers.Inc()
	}
}

// Answered notes the end of a request's answer: its status, how it was
// answered and why its bytes are not the recorded ones.
func (m *Metrics) Answered(r apipath.Request, status int, how, transcoded string) {
	if m == nil {
		return
	}
	ri := requestInfoOf(r)
	if ri.verb == "watch" {
		m.watchers.Dec()
	}
	resource := m.resourceLabel(ri)
	m.requests.WithLabelValues(ri.verb, ri.group, resource, ri.subresource, strconv.Itoa(status), how, transcoded).Inc()
	if apipath.IsWrite(r.Method) && status >= 200 && status < 300 && !ri.dryRun {
		m.writes.WithLabelValues(ri.verb, ri.group, resource).Inc()
	}
}

// resourceLabel is ri's resource, or "other" once maxResourceLabels
// distinct ones are in use.
func (m *Metrics) resourceLabel(ri requestInfo) string {
	if ri.resource == "" {
		return ""
	}
	key := ri.group + "/" + ri.resource + "/" + ri.subresource
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.resources[key] {
		if len(m.resources) >= maxResourceLabels {
			return "other"
		}
		m.resources[key] = true
	}
	return ri.resource
}

// Events notes n watch events going out.
func (m *Metrics) Events(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.eventsSent.Add(float64(n))
}

// Late notes how late n watch events with a recorded time went out
// against their schedule.
func (m *Metrics) Late(n int, late time.Duration) {
	if m == nil {
		return
	}
	s := late.Seconds()
	for range n {
		m.lateness.Observe(s)
	}
}

// SentBytes notes n bytes handed to a client connection.
func (m *Metrics) SentBytes(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.bytes.Add(float64(n))
}

// ConnState follows net/http's connections (http.Server.ConnState): a
// hijacked one is counted again by ConnOpened when a stream takes it
// over.
func (m *Metrics) ConnState(st http.ConnState) {
	if m == nil {
		return
	}
	switch st {
	case http.StateNew:
		m.conns.Inc()
		m.connsTotal.Inc()
	case http.StateClosed, http.StateHijacked:
		m.conns.Dec()
	}
}

// ConnOpened and ConnClosed follow a connection a stream took over.
func (m *Metrics) ConnOpened() {
	if m != nil {
		m.conns.Inc()
	}
}

func (m *Metrics) ConnClosed() {
	if m != nil {
		m.conns.Dec()
	}
}

// requestInfo is what the metrics say of a request, read from its path
// as kube-apiserver's RequestInfoFactory reads it.
type requestInfo struct {
	verb                         string
	group, resource, subresource string
	dryRun                       bool
}

// requestInfoOf is what the metrics label of request r: RequestInfo's
// verb, group, resource and subresource (its first segment), and whether
// it is a dry run.
func requestInfoOf(r apipath.Request) requestInfo {
	ri := requestInfo{verb: r.Verb, dryRun: r.DryRun}
	if r.IsResource {
		ri.group, ri.resource = r.Group, r.Resource.Resource
		ri.subresource, _, _ = strings.Cut(r.Subresource, "/")
	}
	return ri
}
