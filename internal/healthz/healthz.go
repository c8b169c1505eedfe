// Package healthz serves the operational endpoints of a wtrace server —
// /livez, /readyz, /healthz and /metrics — the way kube-apiserver serves
// them (k8s.io/apiserver pkg/server/healthz), so that what a kubelet
// probe, a load balancer or an operator's curl expects of an apiserver
// holds for a replay too (checked against kube-apiserver v1.33):
//
//   - GET or HEAD /livez, /readyz, /healthz: 200 "ok" (text/plain;
//     charset=utf-8, X-Content-Type-Options: nosniff) when every check
//     passes; with ?verbose, one line per check ("[+]ping ok") and
//     "livez check passed". A failing check: 500, always verbose, its
//     reason withheld ("[-]shutdown failed: reason withheld", then
//     "readyz check failed"); the reasons go to the log.
//   - ?exclude=NAME (repeatable) leaves a check out ("[+]NAME excluded:
//     ok"); a name no check has is warned about in the verbose body.
//   - /readyz/NAME runs one check: 200 "ok", or 500 "internal server
//     error: REASON".
//   - /metrics: the Prometheus text exposition format of a registry
//     (promhttp), when the server has one.
//
// Other methods are answered as GET, as kube-apiserver does. It also
// builds the registry every wtrace server registers into (NewRegistry:
// the Go and process collectors). The package holds no state of its own;
// an Endpoints is safe for concurrent use once built.
package healthz

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one named health check. Func returns nil when healthy, or why
// not (logged, never sent: the endpoints are public).
type Check struct {
	Name string
	Func func() error
}

// Endpoints are the health endpoints of one server and, when Metrics is
// set, its /metrics. Build it once; its fields must not change while it
// serves.
type Endpoints struct {
	// Livez, Readyz and Healthz are the checks of each endpoint, in the
	// order the verbose body lists them.
	Livez, Readyz, Healthz []Check
	// Metrics, if set, is served at /metrics.
	Metrics *prometheus.Registry
	// Logger receives a line for every failed check, with its reason
	// (Info). nil discards.
	Logger *slog.Logger

	once    sync.Once
	metrics http.Handler
}

// Paths are the endpoints a server answers itself.
var Paths = []string{"/livez", "/readyz", "/healthz", "/metrics"}

// Owns reports whether path is one of e's endpoints (or one of their
// checks): the request is then e's to answer, not the session's.
func (e *Endpoints) Owns(path string) bool {
	if path == "/metrics" {
		return e.Metrics != nil
	}
	_, _, ok := e.endpoint(path)
	return ok
}

// endpoint splits path into an endpoint's name and checks, and the check
// named after it ("" for the endpoint itself).
func (e *Endpoints) endpoint(path string) (name string, checks []Check, ok bool) {
	for _, ep := range []struct {
		name   string
		checks []Check
	}{{"livez", e.Livez}, {"readyz", e.Readyz}, {"healthz", e.Healthz}} {
		rest, found := strings.CutPrefix(path, "/"+ep.name)
		switch {
		case !found:
			continue
		case rest == "":
			return ep.name, ep.checks, true
		case rest[0] == '/':
			for _, c := range ep.checks {
				if c.Name == rest[1:] {
					return ep.name, []Check{c}, true
				}
			}
			// kube-apiserver: 404 for a check it does not have.
			return ep.name, nil, true
		}
	}
	return "", nil, false
}

// ServeHTTP answers a request for one of e's endpoints (see Owns; other
// paths get 404).
func (e *Endpoints) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" && e.Metrics != nil {
		e.once.Do(func() {
			e.metrics = promhttp.HandlerFor(e.Metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
		})
		e.metrics.ServeHTTP(w, r)
		return
	}
	name, checks, ok := e.endpoint(r.URL.Path)
	if !ok || checks == nil {
		http.NotFound(w, r)
		return
	}
	if r.URL.Path != "/"+name {
		// One check (kube's adaptCheckToHandler).
		if err := checks[0].Func(); err != nil {
			e.logFailure(name, checks[0].Name, err)
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "ok")
		return
	}
	q := r.URL.Query()
	excluded := map[string]bool{}
	for _, v := range q["exclude"] {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				excluded[n] = true
			}
		}
	}
	var out bytes.Buffer
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			delete(excluded, c.Name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		if err := c.Func(); err != nil {
			e.logFailure(name, c.Name, err)
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			failed = true
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
	}
	if len(excluded) > 0 {
		names := make([]string, 0, len(excluded))
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		sort.Strings(names)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if failed {
		// Always verbose on failure (http.Error adds the newline).
		http.Error(w, fmt.Sprintf("%s%s check failed", out.String(), name), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := q["verbose"]; !verbose {
		fmt.Fprint(w, "ok")
		return
	}
	out.WriteTo(w)
	fmt.Fprintf(w, "%s check passed\n", name)
}

func (e *Endpoints) logFailure(endpoint, check string, err error) {
	if e.Logger != nil {
		e.Logger.Info("health check failed", "endpoint", endpoint, "check", check, "err", err)
	}
}

// Ping is the check every endpoint has: the server answers.
var Ping = Check{Name: "ping", Func: func() error { return nil }}

// NewRegistry returns a Prometheus registry holding the Go runtime's and
// the process's collectors (go_*, process_*), for a server to register
// its own metrics into. Nothing registers into prometheus's default
// registry: a library never exposes metrics its caller did not ask for.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Register registers c in reg, or returns the collector of the same
// descriptors already there (several servers sharing one registry share
// their metrics). It panics on any other registration error: the
// descriptors are the program's own.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("healthz: registering a collector: %v", err))
	}
	return c
}
