package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Server is one side of the comparison: an apiserver, or a replay.
type Server struct {
	URL    string
	Client *http.Client
	Token  string // a bearer token for every request, if not ""
}

// answer is what a server answered one case, normalized.
type answer struct {
	code        int
	contentType string
	warnings    []string
	body        any
	raw         []byte
	err         error
}

// do sends one case's request, its placeholders filled from v.
func (s Server) do(ctx context.Context, c Case, v *view) answer {
	target := s.URL + c.Path
	if q := v.fill(c.Query, true); q != "" {
		target += "?" + q
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, target, strings.NewReader(v.fill(c.Body, false)))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("User-Agent", "wtrace-conformance/1.0")
	if c.ContentType != "" {
		req.Header.Set("Content-Type", c.ContentType)
	}
	if c.Accept != "" {
		req.Header.Set("Accept", c.Accept)
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !c.Watch {
		return answer{err: err}
	}
	a := answer{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), warnings: resp.Header.Values("Warning"), raw: b}
	if c.Watch && resp.StatusCode == http.StatusOK {
		evs, err := splitEvents(a.contentType, b)
		if err != nil {
			a.err = err
			return a
		}
		body, err := v.events(evs)
		a.body, a.err = body, err
		return a
	}
	j, err := toJSON(a.contentType, b)
	if err != nil {
		a.err = fmt.Errorf("decoding a %s answer: %w", a.contentType, err)
		return a
	}
	v.remember(j, c.Mark)
	a.body, a.err = v.normalize(j)
	return a
}

// Result is the comparison of one case's answers.
type Result struct {
	Case Case
	// Same: the same status, Content-Type, Warning headers and
	// normalized body (or events).
	Same bool
	// Why says where the answers differ ("" when Same).
	Why string
	// NotServed: the replay answered 404 or 405 where the apiserver did
	// not.
	NotServed bool
	// Real and Replay are the two answers' status codes and bodies, for
	// the test's log.
	RealCode, ReplayCode int
	Real, Replay         []byte
}

// compare compares the answers of one case.
func compare(c Case, real, mine answer) Result {
	r := Result{Case: c, RealCode: real.code, ReplayCode: mine.code, Real: real.raw, Replay: mine.raw}
	switch {
	case real.err != nil:
		r.Why = "the apiserver's answer: " + real.err.Error()
	case mine.err != nil:
		r.Why = "the replay's answer: " + mine.err.Error()
	case real.code != mine.code:
		r.Why = fmt.Sprintf("status %d, the apiserver's %d", mine.code, real.code)
		r.NotServed = (mine.code == http.StatusNotFound || mine.code == http.StatusMethodNotAllowed) &&
			real.code != http.StatusNotFound && real.code != http.StatusMethodNotAllowed
	case real.contentType != mine.contentType:
		r.Why = fmt.Sprintf("Content-Type %q, the apiserver's %q", mine.contentType, real.contentType)
	case !slices.Equal(real.warnings, mine.warnings):
		r.Why = fmt.Sprintf("Warning headers %q, the apiserver's %q", mine.warnings, real.warnings)
	case c.Watch && !periodicBookmarks(real.body, mine.body):
		r.Why = "no periodic BOOKMARK where the apiserver sent one"
	case !reflect.DeepEqual(comparable(c, real.body), comparable(c, mine.body)):
		r.Why = "body differs at " + firstDifference(comparable(c, real.body), comparable(c, mine.body), "")
		if os.Getenv("WTRACE_CONFORMANCE_DEBUG") != "" {
			a, _ := json.Marshal(comparable(c, real.body))
			b, _ := json.Marshal(comparable(c, mine.body))
			r.Why += "\n  normalized apiserver: " + string(a) + "\n  normalized replay: " + string(b)
		}
	default:
		r.Same = true
	}
	return r
}

// Run plays every group of cases (Plan) against the apiserver and the
// replay, the cases of a group in order and both servers in step, up to
// parallel groups at a time, and returns the results in the order of the
// plans.
func Run(ctx context.Context, real, replay Server, plans [][]Case, parallel int) []Result {
	results := make([][]Result, len(plans))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, cases := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = runGroup(ctx, real, replay, cases)
		}()
	}
	wg.Wait()
	var out []Result
	for _, rs := range results {
		out = append(out, rs...)
	}
	return out
}

// runGroup plays one group's cases; consecutive Parallel cases at once.
func runGroup(ctx context.Context, real, replay Server, cases []Case) []Result {
	rv, mv := newView(), newView()
	out := make([]Result, len(cases))
	for i := 0; i < len(cases); {
		j := i + 1
		for cases[i].Parallel && j < len(cases) && cases[j].Parallel {
			j++
		}
		if j == i+1 {
			out[i] = compare(cases[i], real.do(ctx, cases[i], rv), replay.do(ctx, cases[i], mv))
			i = j
			continue
		}
		// Watches of what already happened: both servers' at once, each
		// side's views copied (a watch only remembers).
		var wg sync.WaitGroup
		for k := i; k < j; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ra, ma answer
				var inner sync.WaitGroup
				inner.Add(2)
				go func() { defer inner.Done(); ra = real.do(ctx, cases[k], rv.copy()) }()
				go func() { defer inner.Done(); ma = replay.do(ctx, cases[k], mv.copy()) }()
				inner.Wait()
				out[k] = compare(cases[k], ra, ma)
			}()
		}
		wg.Wait()
		i = j
	}
	return out
}

// copy is a view whose names continue v's, for a case read beside
// others.
func (v *view) copy() *view {
	c := newView()
	for _, p := range []struct{ dst, src map[string]string }{
		{c.uids, v.uids}, {c.rvs, v.rvs}, {c.lastRV, v.lastRV}, {c.lastUID, v.lastUID}, {c.lastObj, v.lastObj}, {c.marks, v.marks},
	} {
		for k, x := range p.src {
			p.dst[k] = x
		}
	}
	c.cont, c.token = v.cont, v.token
	c.counts = map[string]int{}
	for k, n := range v.counts {
		c.counts[k] = n
	}
	return c
}

// clip shortens a body for a log line.
func clip(b []byte) string {
	const max = 4000
	b = bytes.TrimSpace(b)
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// withoutPeriodic leaves a watch's periodic bookmarks out of its
// normalized events (any other body is returned as it is): when the
// apiserver sends them depends on its timers and its load, and
// periodicBookmarks compares them on their own.
// comparable is the part of an answer's body the two servers must agree
// on: a watch's events without the periodic bookmarks, and for a
// resource kube-apiserver's own controllers write behind each change
// (asyncControllers), in order per object rather than across objects.
func comparable(c Case, body any) any {
	body = withoutPeriodic(body)
	if !c.Watch || !asyncControllers[c.Row] {
		return body
	}
	evs, _ := body.([]any)
	var names []string
	byName := map[string][]any{}
	for _, e := range evs {
		name := ""
		if m, ok := e.(map[string]any); ok {
			if o, ok := m["object"].(map[string]any); ok {
				if md, ok := o["metadata"].(map[string]any); ok {
					name, _ = md["name"].(string)
				}
			}
		}
		if _, seen := byName[name]; !seen {
			names = append(names, name)
		}
		byName[name] = append(byName[name], e)
	}
	out := []any{}
	for _, n := range names {
		out = append(out, byName[n]...)
	}
	return out
}

// asyncControllers are the rows of resources whose objects
// kube-apiserver's own controllers change moments after a client's write,
// from a work queue (a CustomResourceDefinition's naming and establishing
// controllers, an APIService's availability controller, a FlowSchema's
// APF configuration controller): how their
// writes interleave with the harness's next requests across objects is a
// race inside the apiserver (seen in both: a FlowSchema created just
// before another got its Dangling condition after the other's create),
// not something a replay can reproduce.
var asyncControllers = map[string]bool{
	"apiextensions.k8s.io/v1 customresourcedefinitions": true,
	"apiregistration.k8s.io/v1 apiservices":             true,
	"flowcontrol.apiserver.k8s.io/v1 flowschemas":       true,
}

func withoutPeriodic(body any) any {
	evs, ok := body.([]any)
	if !ok {
		return body
	}
	out := []any{}
	for _, e := range evs {
		if !isPeriodic(e) {
			out = append(out, e)
		}
	}
	return out
}

// periodicBookmarks reports whether the replay sent a periodic bookmark
// if the apiserver did (the apiserver may miss its own on a loaded
// machine: a replay that sends one where it did not is not held against).
func periodicBookmarks(real, mine any) bool {
	has := func(body any) bool {
		evs, _ := body.([]any)
		for _, e := range evs {
			if isPeriodic(e) {
				return true
			}
		}
		return false
	}
	return !has(real) || has(mine)
}

// isPeriodic reports whether a normalized event is a BOOKMARK that is not
// a streaming list's initial-events-end.
func isPeriodic(e any) bool {
	m, _ := e.(map[string]any)
	if m == nil || m["type"] != "BOOKMARK" {
		return false
	}
	o, _ := m["object"].(map[string]any)
	md, _ := o["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	return ann["k8s.io/initial-events-end"] == nil
}
