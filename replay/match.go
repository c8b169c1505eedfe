package replay

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// maxTimeoutSeconds bounds the timeoutSeconds a client may ask for (a year):
// larger values are treated as no timeout.
const maxTimeoutSeconds = 365 * 24 * 3600

// query is a request reduced to what matching needs.
type query struct {
	method  string
	path    string // decoded path, legacy /watch/ segment removed
	watch   bool
	rv      string // resourceVersion, "0" normalised to "" (both mean "no RV known")
	rawRV   string // resourceVersion as sent
	cont    string // continue token
	sie     bool   // sendInitialEvents=true
	timeout time.Duration
	key     string // method, path, watch and every non-varying parameter, order-insensitive
	accept  string // the request's Accept header (incoming requests only)
}

var errTarget = errors.New("replay: malformed request-target")

// parseTarget reduces a request-target ("/api/v1/pods?watch=1") to a query.
func parseTarget(method, target string) (query, error) {
	if len(target) > apipath.MaxTargetLen {
		return query{}, fmt.Errorf("%w: %d bytes (limit %d)", errTarget, len(target), apipath.MaxTargetLen)
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return query{}, fmt.Errorf("%w: %v", errTarget, err)
	}
	vals, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return query{}, fmt.Errorf("%w: %v", errTarget, err)
	}
	return newQuery(method, u.Path, vals), nil
}

func newQuery(method, path string, vals url.Values) query {
	q := query{method: strings.ToUpper(method)}
	q.path, q.watch = apipath.StripWatchSegment(path)
	if v := vals.Get("watch"); v != "" {
		if b, err := strconv.ParseBool(v); err == nil && b {
			q.watch = true
		}
	}
	q.rawRV = vals.Get("resourceVersion")
	q.rv = q.rawRV
	if q.rv == "0" {
		q.rv = ""
	}
	q.cont = vals.Get("continue")
	if b, err := strconv.ParseBool(vals.Get("sendInitialEvents")); err == nil && b {
		q.sie = true
	}
	if n, err := strconv.ParseInt(vals.Get("timeoutSeconds"), 10, 64); err == nil && n > 0 && n <= maxTimeoutSeconds {
		q.timeout = time.Duration(n) * time.Second
	}
	q.key = apipath.Key(q.method, q.path, q.watch, vals)
	return q
}

// listKey is the key of the LIST a watch query pairs with: same path and
// parameters, GET, not a watch.
func (q query) listKey() string {
	return strings.TrimSuffix(q.key, apipath.WatchSuffix)
}

// watchKey is the key of the WATCH a LIST query pairs with.
func (q query) watchKey() string {
	if q.watch {
		return q.key
	}
	return q.key + apipath.WatchSuffix
}

// recorded is one exchange of the session that can answer requests.
type recorded struct {
	id     int64
	info   *formats.ExchangeInfo
	q      query
	target string
	format frame.Format // event format; Unknown for an opaque body
	media  string       // response media type ("application/json"), lower case, no parameters
	// midstream: the request was not captured; target and q are the
	// ones its events show (midstreamTarget).
	midstream bool
}

// respTime is the Response record's time: the origin of the exchange's
// timeline.
func (x *recorded) respTime() int64 { return x.info.Response.Time }

// endTime is when the recorded response ended (End, else its last record).
func (x *recorded) endTime() int64 {
	if x.info.End != nil {
		return x.info.End.Time
	}
	return x.info.Last
}

// endStatus is how the response ended; an exchange the file ended inside
// counts as truncated.
func (x *recorded) endStatus() formats.EndStatus {
	if x.info.End == nil {
		return formats.EndTruncated
	}
	return x.info.End.Status
}

// liveFrom says which frames of a watch are live history that a client can
// resume after: all of them for a watch that started from a resourceVersion;
// for a streaming list, those from the initial-events-end bookmark on; none
// for a watch that started from "" or "0" (its initial ADDED events carry
// old resourceVersions and nothing marks their end). A watch captured from
// its middle counts as started from a resourceVersion: its request is
// unknown, and what was captured of it is history.
func (x *recorded) resumable() bool {
	return x.format != frame.Unknown && (x.q.rv != "" || x.q.sie || x.midstream)
}

// matcher holds the recorded exchanges by key and the per-key cursors.
type matcher struct {
	byKey   map[string][]*recorded
	all     []*recorded
	cursors map[string]int // guarded by Server.mu
}

// newMatcher indexes the recorded exchanges of f; mids are its
// world.MidstreamTargets.
func newMatcher(f *formats.File, mids map[int64]string) *matcher {
	idx := f.Index()
	m := &matcher{byKey: map[string][]*recorded{}, cursors: map[string]int{}}
	for i := range idx.Exchanges {
		info := &idx.Exchanges[i]
		if info.Response == nil {
			continue
		}
		method, target := info.Request.Method, info.Request.Target
		if info.Request.Missing {
			var ok bool
			if target, ok = mids[info.Request.Exchange]; !ok {
				continue
			}
			method = "GET"
		}
		q, err := parseTarget(method, target)
		if err != nil {
			continue
		}
		x := &recorded{id: info.Request.Exchange, info: info, q: q, target: target, midstream: info.Request.Missing}
		x.format = info.Response.Events
		for _, h := range info.Response.Header {
			if strings.EqualFold(h.Name, "Content-Type") {
				x.media = mediaType(h.Value)
			}
		}
		m.byKey[q.key] = append(m.byKey[q.key], x)
		m.all = append(m.all, x)
	}
	for _, xs := range m.byKey {
		sort.SliceStable(xs, func(i, j int) bool { return xs[i].id < xs[j].id })
	}
	return m
}

// prefer returns the candidates for which ok holds, or all of them if none
// does.
func prefer(xs []*recorded, ok func(*recorded) bool) []*recorded {
	var out []*recorded
	for _, x := range xs {
		if ok(x) {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return xs
	}
	return out
}

func filter(xs []*recorded, ok func(*recorded) bool) []*recorded {
	var out []*recorded
	for _, x := range xs {
		if ok(x) {
			out = append(out, x)
		}
	}
	return out
}

// mediaType returns the type/subtype of a media type, lower case.
func mediaType(v string) string {
	mt, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// acceptRank says how well a response of media type mt suits a request's
// Accept header: 3 listed explicitly, 2 JSON under a wildcard (what the
// apiserver sends when the client does not say), 1 another type under a
// wildcard, 0 not acceptable. q=0 entries exclude.
func acceptRank(accept, mt string) int {
	if strings.TrimSpace(accept) == "" {
		accept = "*/*"
	}
	typ, _, _ := strings.Cut(mt, "/")
	best := 0
	for _, part := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if qZero(params) {
			continue
		}
		r := 0
		switch {
		case name == mt:
			r = 3
		case name == "*/*" || name == typ+"/*":
			r = 1
			if mt == "application/json" || mt == "" {
				r = 2
			}
		}
		if r > best {
			best = r
		}
	}
	return best
}

// qZero reports whether media-range parameters say q=0 (RFC 9110 §12.4.2).
func qZero(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && f == 0
		}
	}
	return false
}

// orderAccepted returns xs with the candidates that suit the Accept header
// best first, in recorded order otherwise.
func orderAccepted(xs []*recorded, accept string) []*recorded {
	out := append([]*recorded(nil), xs...)
	sort.SliceStable(out, func(i, j int) bool { return acceptRank(accept, out[i].media) > acceptRank(accept, out[j].media) })
	return out
}

// preferAccepted keeps the candidates whose response type suits the
// request's Accept header best.
func preferAccepted(xs []*recorded, accept string) []*recorded {
	best := -1
	for _, x := range xs {
		if r := acceptRank(accept, x.media); r > best {
			best = r
		}
	}
	return prefer(xs, func(x *recorded) bool { return acceptRank(accept, x.media) == best })
}

// pick returns the next candidate of the cursor named ck: successive calls
// return xs in order, then the last one again (or, with loop, the first
// again). The caller holds the lock guarding cursors.
func (m *matcher) pick(xs []*recorded, ck string, loop bool) *recorded {
	i := m.cursors[ck]
	if i >= len(xs) {
		if loop {
			i = 0
		} else {
			i = len(xs) - 1
		}
	}
	m.cursors[ck] = i + 1
	return xs[i]
}

// closest returns up to n recorded request-targets that look most like q:
// same path first, then the longest common path prefix.
func (m *matcher) closest(q query, n int) []string {
	type cand struct {
		score  int
		target string
	}
	seen := map[string]bool{}
	var cs []cand
	for _, x := range m.all {
		t := x.q.method + " " + x.target
		if seen[t] {
			continue
		}
		seen[t] = true
		s := commonPrefix(q.path, x.q.path)
		if x.q.path == q.path {
			s += 1 << 20
		}
		if x.q.watch == q.watch {
			s++
		}
		cs = append(cs, cand{s, t})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].score > cs[j].score })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].target)
	}
	return out
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// rvNumber parses a resourceVersion as etcd writes it (a decimal uint64).
func rvNumber(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}
