package tape

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
)

// Query is a request reduced to what matching needs: the request as
// kube-apiserver reads it (apipath.Request: its path, watch, key, …), its
// resourceVersion with "0" normalised to "", and the Accept header.
type Query struct {
	apipath.Request
	RV     string // resourceVersion, "0" normalised to "" (both mean "no RV known")
	Accept string // the request's Accept header (incoming requests only)
}

// ParseTarget reduces a request-target ("/api/v1/pods?watch=1") to a
// query (apipath.Parse).
func ParseTarget(method, target string) (Query, error) {
	r, err := apipath.Parse(method, target)
	if err != nil {
		return Query{}, fmt.Errorf("replay: %w", err)
	}
	return QueryOf(r), nil
}

// QueryOf is the query of request r.
func QueryOf(r apipath.Request) Query {
	q := Query{Request: r, RV: r.ResourceVersion}
	if q.RV == "0" {
		q.RV = ""
	}
	return q
}

// listKey is the key of the LIST a watch query pairs with: same path and
// parameters, GET, not a watch.
func (q Query) ListKey() string {
	return strings.TrimSuffix(q.Key, apipath.WatchSuffix)
}

// watchKey is the key of the WATCH a LIST query pairs with.
func (q Query) WatchKey() string {
	if q.Watch {
		return q.Key
	}
	return q.Key + apipath.WatchSuffix
}

// recorded is one exchange of the session that can answer requests.
type Exchange struct {
	ID     int64
	Info   *formats.ExchangeInfo
	Q      Query
	target string
	Format frame.Format // event format; Unknown for an opaque body
	Media  string       // response media type ("application/json"), lower case, no parameters
	// midstream: the request was not captured; target and q are the
	// ones its events show (midstreamTarget).
	midstream bool
}

// respTime is the Response record's time: the origin of the exchange's
// timeline.
func (x *Exchange) RespTime() int64 { return x.Info.Response.Time }

// endTime is when the recorded response ended (End, else its last record).
func (x *Exchange) EndTime() int64 {
	if x.Info.End != nil {
		return x.Info.End.Time
	}
	return x.Info.Last
}

// endStatus is how the response ended; an exchange the file ended inside
// counts as truncated.
func (x *Exchange) EndStatus() formats.EndStatus {
	if x.Info.End == nil {
		return formats.EndTruncated
	}
	return x.Info.End.Status
}

// ListFormat is the format of a LIST response, from its Content-Type.
func (x *Exchange) ListFormat() frame.Format {
	for _, h := range x.Info.Response.Header {
		if strings.EqualFold(h.Name, "Content-Type") {
			if strings.Contains(strings.ToLower(h.Value), "protobuf") {
				return frame.Protobuf
			}
			return frame.JSON
		}
	}
	return frame.JSON
}

// liveFrom says which frames of a watch are live history that a client can
// resume after: all of them for a watch that started from a resourceVersion;
// for a streaming list, those from the initial-events-end bookmark on; none
// for a watch that started from "" or "0" (its initial ADDED events carry
// old resourceVersions and nothing marks their end). A watch captured from
// its middle counts as started from a resourceVersion: its request is
// unknown, and what was captured of it is history.
func (x *Exchange) Resumable() bool {
	return x.Format != frame.Unknown && (x.Q.RV != "" || x.Q.SendInitialEvents || x.midstream)
}

// matcher holds the recorded exchanges by key and the per-key cursors.
type Matcher struct {
	ByKey   map[string][]*Exchange
	All     []*Exchange
	cursors map[string]int // guarded by the caller (replay: Server.mu)
}

// newMatcher indexes the recorded exchanges of f; mids are its
// world.MidstreamTargets.
func NewMatcher(f *formats.File, mids map[int64]string) *Matcher {
	idx := f.Index()
	m := &Matcher{ByKey: map[string][]*Exchange{}, cursors: map[string]int{}}
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
		q, err := ParseTarget(method, target)
		if err != nil {
			continue
		}
		x := &Exchange{ID: info.Request.Exchange, Info: info, Q: q, target: target, midstream: info.Request.Missing}
		x.Format = info.Response.Events
		for _, h := range info.Response.Header {
			if strings.EqualFold(h.Name, "Content-Type") {
				x.Media = mediaType(h.Value)
			}
		}
		m.ByKey[q.Key] = append(m.ByKey[q.Key], x)
		m.All = append(m.All, x)
	}
	for _, xs := range m.ByKey {
		sort.SliceStable(xs, func(i, j int) bool { return xs[i].ID < xs[j].ID })
	}
	return m
}

// prefer returns the candidates for which ok holds, or all of them if none
// does.
func Prefer(xs []*Exchange, ok func(*Exchange) bool) []*Exchange {
	var out []*Exchange
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

func Filter(xs []*Exchange, ok func(*Exchange) bool) []*Exchange {
	var out []*Exchange
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
// best first (see PreferAccepted), in recorded order otherwise.
func OrderAccepted(xs []*Exchange, accept string) []*Exchange {
	out := append([]*Exchange(nil), xs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].acceptScore(accept) > out[j].acceptScore(accept) })
	return out
}

// preferAccepted keeps the candidates whose response type suits the
// request's Accept header best and, of those, the ones recorded for a
// request that sent the same Accept header: what the server answered this
// very request (kube-apiserver answers an error in JSON when no type the
// client accepts will do, so a JSON answer and a protobuf one may rank
// the same for a CBOR request).
func PreferAccepted(xs []*Exchange, accept string) []*Exchange {
	best := -1
	for _, x := range xs {
		if r := x.acceptScore(accept); r > best {
			best = r
		}
	}
	return Prefer(xs, func(x *Exchange) bool { return x.acceptScore(accept) == best })
}

// acceptScore ranks x for a request's Accept header: acceptRank of its
// response's media type, then whether its own request sent the same
// Accept.
func (x *Exchange) acceptScore(accept string) int {
	r := 2 * acceptRank(accept, x.Media)
	if x.Info != nil && sameAccept(x.Info.Request.Header, accept) {
		r++
	}
	return r
}

// sameAccept reports whether the first Accept field of h is accept (an
// absent one equals "").
func sameAccept(h []formats.Header, accept string) bool {
	for _, f := range h {
		if strings.EqualFold(f.Name, "Accept") {
			return strings.TrimSpace(f.Value) == strings.TrimSpace(accept)
		}
	}
	return strings.TrimSpace(accept) == ""
}

// pick returns the next candidate of the cursor named ck: successive calls
// return xs in order, then the last one again (or, with loop, the first
// again). The caller holds the lock guarding cursors.
func (m *Matcher) Pick(xs []*Exchange, ck string, loop bool) *Exchange {
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
func (m *Matcher) Closest(q Query, n int) []string {
	type cand struct {
		score  int
		target string
	}
	seen := map[string]bool{}
	var cs []cand
	for _, x := range m.All {
		t := x.Q.Method + " " + x.target
		if seen[t] {
			continue
		}
		seen[t] = true
		s := commonPrefix(q.Path, x.Q.Path)
		if x.Q.Path == q.Path {
			s += 1 << 20
		}
		if x.Q.Watch == q.Watch {
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
func RVNumber(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}
