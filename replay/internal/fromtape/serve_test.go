package fromtape

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// newTestAnswerer is the Answerer of a read-only replay (a world, not
// Live) of the corpus recording of scenario, closed with the test.
func newTestAnswerer(t *testing.T, scenario string) *Answerer {
	t.Helper()
	f := wttest.OpenSession(t, wttest.RecordCorpus(t, scenario, false))
	mids := world.MidstreamTargets(f)
	store, err := world.Load(f, world.Options{Now: time.Now, Midstream: mids})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hub := stream.NewHub(ctx, stream.Options{})
	a, err := New(f, mids, store, fromworld.New(ctx, store, hub, fromworld.Options{}), hub, Options{CacheBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestResponseHeader(t *testing.T) {
	rec := []formats.Header{
		{Name: "Content-Type", Value: "application/json"},
		{Name: "audit-id", Value: "abc"},
		{Name: "Connection", Value: "keep-alive, X-Hop"},
		{Name: "X-Hop", Value: "named by Connection"},
		{Name: "Keep-Alive", Value: "timeout=5"},
		{Name: "Transfer-Encoding", Value: "chunked"},
		{Name: "TE", Value: "trailers"},
		{Name: "Trailer", Value: "X-T"},
		{Name: "Upgrade", Value: "h2c"},
		{Name: "Proxy-Authenticate", Value: "Basic"},
		{Name: "Proxy-Foo", Value: "bar"},
		{Name: "Content-Length", Value: "12"},
		{Name: "Date", Value: "Sat, 21 Nov 2026 12:00:00 GMT"},
		{Name: "Set-Cookie", Redacted: true, Len: 20},
		{Name: ":status", Value: "200"},
		{Name: "Content-Encoding", Value: "gzip"},
		{Name: "Warning", Value: "a"},
		{Name: "Warning", Value: "b"},
	}
	tests := []struct {
		name         string
		keepEncoding bool
		want         http.Header
	}{
		{"decoded", false, http.Header{
			"Content-Type": {"application/json"}, "Audit-Id": {"abc"}, "Warning": {"a", "b"},
		}},
		{"as-recorded", true, http.Header{
			"Content-Type": {"application/json"}, "Audit-Id": {"abc"}, "Warning": {"a", "b"}, "Content-Encoding": {"gzip"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := responseHeader(rec, tt.keepEncoding); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("responseHeader(…, %v) = %v; want %v", tt.keepEncoding, got, tt.want)
			}
		})
	}
}

func TestAcceptsGzip(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"gzip, deflate, br", true},
		{"deflate, gzip;q=0.5", true},
		{"gzip;q=0", false},
		{"gzip; q=0.0", false},
		{"*", true},
		{"*;q=0", false},
		{"identity", false},
		{"br, *;q=0.1", true},
		{"*, gzip;q=0", false},
		{"x-gzip", true},
	}
	for _, tt := range tests {
		if got := acceptsGzip(tt.in); got != tt.want {
			t.Errorf("acceptsGzip(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

// TestFlowAllocs: serving a recorded watch with the world (the default
// mode) allocates nothing per event: its resourceVersions are observed
// without a lock or an allocation, as long as no client's write shifted
// them. (The send path is pinned by the stream's TestSendAllocs.)
func TestFlowAllocs(t *testing.T) {
	a := newTestAnswerer(t, "basic-json")
	var x *tape.Exchange
	for _, c := range a.Exchanges() {
		if c.Format != 0 && strings.Contains(c.Info.Request.Target, "watch=true") {
			x = c
			break
		}
	}
	if x == nil {
		t.Fatal("no recorded watch")
	}
	p, err := tape.BuildPlan(a.file, x, false, true)
	if err != nil {
		t.Fatal(err)
	}
	fl := &flow{a: a, x: x, format: x.Format}
	src := &tape.PlanSource{Plan: p}
	run := func() {
		*src = tape.PlanSource{Plan: p}
		fd := &flowFeed{fl: fl, rd: a.reader(nil, src, 0)}
		for {
			if _, ok := fd.Peek(); !ok {
				break
			}
			if w, ok := fd.Take(); ok && len(w.Data) == 0 {
				t.Fatal("an empty write")
			}
		}
	}
	run() // warm up: the world's point moves past every event
	n := testing.AllocsPerRun(20, run)
	if per := n / float64(len(p.Writes)); per > 0.05 {
		t.Errorf("flowFeed: %v allocations for %d writes (%.2f per write); want none per write", n, len(p.Writes), per)
	}
}
