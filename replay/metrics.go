package replay

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/internal/healthz"
)

// The replay's Prometheus metrics (Options.Metrics). The serving code
// calls a few hooks of *metrics, each a no-op on a nil receiver (no
// registry: no metrics, and nothing but a nil check on the serving path):
//
//   - opened and answered, when a request arrives and when its answer is
//     over (route.go): requests by verb, resource, code and how; open
//     watchers; writes applied.
//   - wrote, sentEvents: watch events going out and their lateness against
//     the recorded schedule (serve.go runFrom, flow.go).
//   - sentBytes: bytes handed to a connection (out.go through net/http,
//     conn.go on a taken-over connection).
//   - connOpened, connClosed: client connections (server.go's ConnState,
//     conn.go for the connections a stream takes over).
//   - loaded: a session loaded (server.go New).

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

// metrics are a Server's collectors, registered in Options.Metrics
// (shared with the other Servers of that registry). Safe for concurrent
// use; nil means no metrics.
type metrics struct {
	watchers   prometheus.Gauge
	conns      prometheus.Gauge
	connsTotal prometheus.Counter
	requests   *prometheus.CounterVec
	events     prometheus.Counter
	bytes      prometheus.Counter
	lateness   prometheus.Histogram
	writes     *prometheus.CounterVec
	sessions   prometheus.Counter
	info       *prometheus.GaugeVec

	mu        sync.Mutex
	resources map[string]bool // resource label values in use
}

// newMetrics registers the replay's metrics in reg; nil without one.
func newMetrics(reg *prometheus.Registry) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{resources: map[string]bool{}}
	m.watchers = healthz.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricNamespace, Name: "watchers",
		Help: "Watch requests being served (open watch streams)."}))
	m.conns = healthz.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricNamespace, Name: "connections",
		Help: "Client connections open, including those a watch stream took over from net/http."}))
	m.connsTotal = healthz.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricNamespace, Name: "connections_total",
		Help: "Client connections accepted."}))
	m.requests = healthz.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricNamespace, Name: "requests_total",
		Help: "Requests answered, by Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection; the HTTP method in lower case for other paths), API group, resource, subresource, status code, how they were answered (recorded, resumed, synth-*, after-last, expired, not-found, rejected, …: the how= of the log) and why the bytes are not the recorded ones (transcoded: json→protobuf, Table, rv, writes, …; empty when they are). Counted when the answer is over (a watch when it ends). The replay's own /livez, /readyz, /healthz and /metrics are not counted."},
		[]string{"verb", "group", "resource", "subresource", "code", "how", "transcoded"}))
	m.events = healthz.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricNamespace, Name: "watch_events_sent_total",
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

// loaded notes that s loaded its session.
func (m *metrics) loaded(s *Server) {
	if m == nil {
		return
	}
	m.sessions.Inc()
	m.info.WithLabelValues(string(s.writes), strconv.FormatFloat(s.speed, 'g', -1, 64)).Set(1)
}

// opened notes a request arriving (target as requested).
func (m *metrics) opened(method, target string) {
	if m == nil {
		return
	}
	if watchRequest(method, target) {
		m.watchers.Inc()
	}
}

// answered notes the end of a request's answer: its status, how it was
// answered and why its bytes are not the recorded ones.
func (m *metrics) answered(method, target string, status int, how, transcoded string) {
	if m == nil {
		return
	}
	ri := parseRequestInfo(method, target)
	if ri.verb == "watch" {
		m.watchers.Dec()
	}
	resource := m.resourceLabel(ri)
	m.requests.WithLabelValues(ri.verb, ri.group, resource, ri.subresource, strconv.Itoa(status), how, transcoded).Inc()
	if apipath.IsWrite(method) && status >= 200 && status < 300 && !ri.dryRun {
		m.writes.WithLabelValues(ri.verb, ri.group, resource).Inc()
	}
}

// resourceLabel is ri's resource, or "other" once maxResourceLabels
// distinct ones are in use.
func (m *metrics) resourceLabel(ri requestInfo) string {
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

// sentEvents notes n watch events going out now; at is their recorded
// time on the timeline that maps capture time base to the request's
// arrival (at 0: no recorded time, no lateness).
func (st *streamer) sentEvents(n int, at, base int64, now time.Time) {
	m := st.s.met
	if m == nil || n <= 0 {
		return
	}
	m.events.Add(float64(n))
	if at == 0 || st.s.speed == 0 {
		return
	}
	late := max(now.Sub(st.deadline(at, base)), 0).Seconds()
	for range n {
		m.lateness.Observe(late)
	}
}

// wrote notes write w of a stream going out now (see sentEvents): the
// events whose data ends in it.
func (st *streamer) wrote(w *write, base int64, now time.Time) {
	if st.s.met == nil {
		return
	}
	n := int(w.events)
	if w.event {
		n = 1
	}
	st.sentEvents(n, w.at, base, now)
}

// sentBytes notes n bytes handed to a client connection.
func (m *metrics) sentBytes(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.bytes.Add(float64(n))
}

// connState follows net/http's connections (http.Server.ConnState): a
// hijacked one is counted again by connOpened when a stream takes it
// over.
func (m *metrics) connState(st http.ConnState) {
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

// connOpened and connClosed follow a connection a stream took over.
func (m *metrics) connOpened() {
	if m != nil {
		m.conns.Inc()
	}
}

func (m *metrics) connClosed() {
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

// watchRequest reports whether parseRequestInfo(method, target).verb is
// "watch", without parsing what it need not.
func watchRequest(method, target string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	path, query, _ := strings.Cut(target, "?")
	if _, watch := apipath.StripWatchSegment(path); watch {
		return parseRequestInfo(method, target).verb == "watch"
	}
	return strings.Contains(query, "watch") && parseRequestInfo(method, target).verb == "watch"
}

// parseRequestInfo reads the Kubernetes verb, group, resource and
// subresource of a request (resource "" for paths that are not
// resources: discovery, /version, …, whose verb is the method in lower
// case).
func parseRequestInfo(method, target string) requestInfo {
	ri := requestInfo{verb: strings.ToLower(method)}
	path, rawQuery, _ := strings.Cut(target, "?")
	path, watch := apipath.StripWatchSegment(path)
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		rest = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		ri.group, rest = segs[1], segs[3:]
	default:
		return ri
	}
	q, _ := url.ParseQuery(rawQuery)
	for _, v := range q["dryRun"] {
		ri.dryRun = ri.dryRun || v != ""
	}
	// namespaces/NAME/RESOURCE…, except a namespace's own status and
	// finalize (kube's namespaceSubresources).
	if len(rest) >= 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize" {
		rest = rest[2:]
	}
	ri.resource = rest[0]
	named := len(rest) >= 2
	if len(rest) >= 3 {
		ri.subresource = rest[2]
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch || q.Get("watch") == "true" || q.Get("watch") == "1":
			ri.verb = "watch"
		case named:
			ri.verb = "get"
		default:
			ri.verb = "list"
		}
	case http.MethodPost:
		ri.verb = "create"
	case http.MethodPut:
		ri.verb = "update"
	case http.MethodPatch:
		ri.verb = "patch"
	case http.MethodDelete:
		ri.verb = "delete"
		if !named {
			ri.verb = "deletecollection"
		}
	}
	return ri
}
