package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The control endpoint (Options.Control; wtrace replay --control): what a
// test drives a replay with over HTTP, from any language, on the replay's
// own port — the calls of Server a Go test makes in process (Settle,
// EnvironmentDone, Environment, Requests, Writes), and a stop. Its
// contract, version 1, is docs/CONTROL.md; package wtracetest (a module
// of its own) is its Go client. Its requests are not the clients': they
// pass the Host and path filter (loopback names by default), but they
// are not logged as requests, not recorded (Options.Out), and do not
// count in the clients' activity that quiet waits for.
//
//	GET  /wtrace/v1/status
//	GET  /wtrace/v1/settle?quiet=300ms&timeout=1m
//	GET  /wtrace/v1/environment?wait=1m
//	GET  /wtrace/v1/requests[?writes=true]
//	POST /wtrace/v1/stop

// ControlPrefix is the path of the control endpoint's version 1.
const ControlPrefix = "/wtrace/v1/"

// ControlAPIVersion is the apiVersion of its answers.
const ControlAPIVersion = "wtrace/v1"

// maxControlWait bounds how long a settle or an environment wait holds
// its request (a client's timeout asks for less).
const maxControlWait = time.Hour

// Control configures the control endpoint of a Server (Options.Control).
type Control struct {
	// Stop is called, once, when a client asks the replay to stop (POST
	// /wtrace/v1/stop), after the answer went out: the program then shuts
	// the Server down as on SIGTERM (wtrace replay does: its --out is
	// closed, then it exits). nil refuses stops (501).
	Stop func()
	// Session and Run name the session replayed and the run's session
	// file (--out) in the answers; "" leaves them out.
	Session, Run string
}

// control serves the control endpoint; nil when Options.Control is nil.
type control struct {
	s    *Server
	c    Control
	once sync.Once
}

// serveControl answers r if the control endpoint is on and r asks for
// it, and reports whether it did.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) bool {
	if s.ctl == nil || !strings.HasPrefix(r.URL.Path, "/wtrace/") {
		return false
	}
	s.ctl.ServeHTTP(w, r)
	return true
}

// ControlStatus is the answer of GET /wtrace/v1/status.
type ControlStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // "Status"
	Session    string `json:"session,omitempty"`
	Run        string `json:"run,omitempty"`
	// Writes and Pace are the replay's modes (Options.Writes, Pace).
	Writes string `json:"writes"`
	Pace   string `json:"pace,omitempty"`
	// EnvironmentDone: the environment was played (always false for a
	// replay that does not answer writes: it has none).
	EnvironmentDone bool `json:"environmentDone"`
	// Requests counts the clients' requests answered so far.
	Requests int `json:"requests"`
}

// ControlSettle is the answer of GET /wtrace/v1/settle.
type ControlSettle struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // "Settle"
	// Settled: the environment was played and the clients were then
	// quiet for the quiet window; false when the timeout came first.
	Settled bool `json:"settled"`
}

// ControlEnvironment is the answer of GET /wtrace/v1/environment: what
// the replay did with the recording's environment (Server.Environment).
type ControlEnvironment struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // "Environment"
	// Done: every change was applied or dropped (EnvironmentDone).
	Done bool `json:"done"`
	// Clients names the clients under test; Changes counts the
	// environment's changes, Applied those applied so far; Requests and
	// Writes count the recorded requests and successful writes of the
	// clients under test, Behaviour the versions their writes made (left
	// out of the world).
	Clients   string `json:"clients,omitempty"`
	Changes   int    `json:"changes"`
	Applied   int    `json:"applied"`
	Requests  int    `json:"requests"`
	Writes    int    `json:"writes"`
	Behaviour int    `json:"behaviour"`
	// Dropped are the changes that had nothing to apply to, and why.
	Dropped []ControlDropped `json:"dropped"`
}

// ControlDropped is an environment change the replay dropped.
type ControlDropped struct {
	Type            string `json:"type"` // ADDED, MODIFIED, DELETED
	Group           string `json:"group,omitempty"`
	Version         string `json:"version"`
	Resource        string `json:"resource"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"` // as recorded
	Reason          string `json:"reason"`
}

// ControlRequests is the answer of GET /wtrace/v1/requests.
type ControlRequests struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"` // "RequestList"
	Items      []ControlRequest `json:"items"`
}

// ControlRequest is one request of the run (Server.Requests).
type ControlRequest struct {
	Method string `json:"method"`
	Target string `json:"target"`
	// Header is as received, less credentials (Authorization,
	// Proxy-Authorization, Cookie).
	Header map[string][]string `json:"header,omitempty"`
	// Body is the body of a write (base64, as JSON carries bytes).
	Body []byte `json:"body,omitempty"`
	// Arrival and Done are when it arrived and when its answer ended.
	Arrival time.Time `json:"arrival"`
	Done    time.Time `json:"done"`
	Status  int       `json:"status"`
	// How it was answered: recorded, resumed, synth-create, … (the log's
	// how=); Exchange the recorded exchange served, or -1.
	How        string `json:"how"`
	Exchange   int64  `json:"exchange"`
	Transcoded string `json:"transcoded,omitempty"`
	// ContentType and Response are those of a write's answer (base64).
	ContentType string `json:"contentType,omitempty"`
	Response    []byte `json:"response,omitempty"`
}

// ControlStop is the answer of POST /wtrace/v1/stop.
type ControlStop struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // "Stop"
	Stopping   bool   `json:"stopping"`
	Run        string `json:"run,omitempty"`
}

// controlError is the answer of a request the endpoint cannot answer.
type controlError struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // "Error"
	Code       int    `json:"code"`
	Message    string `json:"message"`
}

func (c *control) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, ControlPrefix)
	if !ok {
		c.fail(w, http.StatusNotFound, "the control endpoint's versions: %s", ControlPrefix)
		return
	}
	method := map[string]string{"status": "GET", "settle": "GET", "environment": "GET", "requests": "GET", "stop": "POST"}[name]
	switch {
	case method == "":
		c.fail(w, http.StatusNotFound, "%s%s: no such call (status, settle, environment, requests, stop)", ControlPrefix, name)
		return
	case r.Method != method:
		w.Header().Set("Allow", method)
		c.fail(w, http.StatusMethodNotAllowed, "%s%s takes %s", ControlPrefix, name, method)
		return
	}
	q := r.URL.Query()
	switch name {
	case "status":
		c.write(w, http.StatusOK, c.status())
	case "settle":
		quiet, err := durationParam(q.Get("quiet"), DefaultQuietWindow)
		if err != nil {
			c.fail(w, http.StatusBadRequest, "quiet: %v", err)
			return
		}
		wait, err := durationParam(q.Get("timeout"), time.Minute)
		if err != nil {
			c.fail(w, http.StatusBadRequest, "timeout: %v", err)
			return
		}
		done, stop := c.deadline(r, wait)
		defer stop()
		c.write(w, http.StatusOK, ControlSettle{APIVersion: ControlAPIVersion, Kind: "Settle", Settled: c.s.Settle(done, quiet)})
	case "environment":
		wait, err := durationParam(q.Get("wait"), 0)
		if err != nil {
			c.fail(w, http.StatusBadRequest, "wait: %v", err)
			return
		}
		if ed := c.s.EnvironmentDone(); wait > 0 && ed != nil {
			done, stop := c.deadline(r, wait)
			select {
			case <-ed:
			case <-done:
			}
			stop()
		}
		c.write(w, http.StatusOK, c.environment())
	case "requests":
		writes := q.Get("writes") == "true"
		list := ControlRequests{APIVersion: ControlAPIVersion, Kind: "RequestList", Items: []ControlRequest{}}
		for _, rq := range c.s.Requests() {
			if !writes || rq.IsWrite() {
				list.Items = append(list.Items, controlRequest(rq))
			}
		}
		c.write(w, http.StatusOK, list)
	case "stop":
		if c.c.Stop == nil {
			c.fail(w, http.StatusNotImplemented, "this replay cannot be stopped through its control endpoint")
			return
		}
		c.write(w, http.StatusAccepted, ControlStop{APIVersion: ControlAPIVersion, Kind: "Stop", Stopping: true, Run: c.c.Run})
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		c.once.Do(func() { go c.c.Stop() })
	}
}

// deadline is a channel closed when wait (at most maxControlWait) has
// passed or the request ended (the client left, the server closed); stop
// releases it.
func (c *control) deadline(r *http.Request, wait time.Duration) (<-chan struct{}, func()) {
	ctx, cancel := context.WithTimeout(r.Context(), min(wait, maxControlWait))
	return ctx.Done(), cancel
}

func durationParam(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("%s: must be 0 or more", v)
	}
	return d, err
}

func (c *control) status() ControlStatus {
	st := ControlStatus{APIVersion: ControlAPIVersion, Kind: "Status", Session: c.c.Session, Run: c.c.Run,
		Writes: string(c.s.opts.Writes), Requests: len(c.s.Requests())}
	if st.Writes == "" {
		st.Writes = string(WritesAnswer)
	}
	if c.s.opts.Writes.AnswersWrites() {
		st.Pace = string(c.s.opts.Pace)
		if st.Pace == "" {
			st.Pace = string(PaceRecorded)
		}
	}
	if ed := c.s.EnvironmentDone(); ed != nil {
		select {
		case <-ed:
			st.EnvironmentDone = true
		default:
		}
	}
	return st
}

func (c *control) environment() ControlEnvironment {
	e := ControlEnvironment{APIVersion: ControlAPIVersion, Kind: "Environment", Dropped: []ControlDropped{}}
	if ed := c.s.EnvironmentDone(); ed != nil {
		select {
		case <-ed:
			e.Done = true
		default:
		}
	}
	r := c.s.Environment()
	if r == nil {
		return e
	}
	e.Clients, e.Changes, e.Applied, e.Requests, e.Writes, e.Behaviour = r.Clients, r.Changes, r.Applied, r.Requests, r.Writes, r.Behaviour
	for _, d := range r.Dropped {
		e.Dropped = append(e.Dropped, ControlDropped{Type: d.Type.String(), Group: d.Resource.Group, Version: d.Resource.Version,
			Resource: d.Resource.Resource, Namespace: d.Change.Key.Namespace, Name: d.Change.Key.Name, ResourceVersion: d.Change.RV, Reason: d.Reason})
	}
	return e
}

// credentialHeaders are left out of the requests the endpoint lists.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

func controlRequest(r Request) ControlRequest {
	h := r.Header.Clone()
	for _, k := range credentialHeaders {
		h.Del(k)
	}
	return ControlRequest{Method: r.Method, Target: r.Target, Header: h, Body: r.Body, Arrival: r.Arrival, Done: r.Done,
		Status: r.Status, How: r.How, Exchange: r.Exchange, Transcoded: r.Transcoded, ContentType: r.ContentType, Response: r.Response}
}

func (c *control) write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func (c *control) fail(w http.ResponseWriter, code int, format string, args ...any) {
	c.write(w, code, controlError{APIVersion: ControlAPIVersion, Kind: "Error", Code: code, Message: fmt.Sprintf(format, args...)})
}
