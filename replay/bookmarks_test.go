package replay

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/wtrace/wtrace/frame"
)

// TestPeriodicBookmarks: a world watch that allows bookmarks gets one
// every minute and one 2 s before its timeout, as from kube-apiserver's
// watch cache, each at the resourceVersion it has seen everything up to
// (never going back);
// a watch that does not allow them gets none. On a fake clock, so that
// the minutes are the test's.
func TestPeriodicBookmarks(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []time.Duration // offsets of the bookmarks from the watch's start
	}{
		{"allowWatchBookmarks=true&timeoutSeconds=30", []time.Duration{28 * time.Second}},
		{"allowWatchBookmarks=true&timeoutSeconds=130", []time.Duration{time.Minute, 2 * time.Minute, 128 * time.Second}},
		{"timeoutSeconds=30", nil},
	} {
		t.Run(tc.query, func(t *testing.T) {
			arrival := time.Unix(1_800_000_000, 0)
			clock := NewFakeClock(arrival)
			srv := newTestServer(t, corpusSession(t, "basic-json"), Options{Speed: 1, Clock: clock})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// A scope nothing enters: only bookmarks come.
			const cms = "/api/v1/namespaces/corpus-basic/configmaps?labelSelector=nothing%3Dhere"
			_, list := get(t, srv.Client(), srv.URL+cms)
			from := jsonListRV(t, list)
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+cms+"&watch=true&resourceVersion="+from+"&"+tc.query, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			ch := watchReader(t, resp.Body)
			last := mustUint(t, from)
			for _, off := range tc.want {
				at := arrival.Add(off)
				if next := driveUntil(t, ctx, clock, at); !next.Equal(at) {
					t.Fatalf("the next timer at %v; want a bookmark at %v", next.Sub(arrival), off)
				}
				clock.AdvanceTo(at)
				select {
				case ev, ok := <-ch:
					if !ok {
						t.Fatalf("the watch ended before its bookmark at %v", off)
					}
					m, err := frame.Peek(frame.JSON, ev)
					if err != nil || m.Type != "BOOKMARK" || m.Kind != "ConfigMap" {
						t.Fatalf("event %.200s (%v) at %v; want a bookmark of ConfigMaps", ev, err, off)
					}
					// Nothing enters the scope: each bookmark is at the
					// world's point then (the environment's changes move it).
					if n := mustUint(t, m.ResourceVersion); n < last {
						t.Errorf("bookmark at resourceVersion %d, before %d (the list's, or the last bookmark's)", n, last)
					} else {
						last = n
					}
				case <-ctx.Done():
					t.Fatalf("no bookmark at %v", off)
				}
			}
			end := arrival.Add(timeout(t, tc.query))
			driveUntil(t, ctx, clock, end)
			clock.AdvanceTo(end)
			select {
			case ev, ok := <-ch:
				if ok {
					t.Fatalf("after the bookmarks, %.200s; want the end of the watch at its timeout", ev)
				}
			case <-ctx.Done():
				t.Fatal("the watch did not end at its timeout")
			}
		})
	}
}

// timeout reads a query's timeoutSeconds.
func timeout(t *testing.T, query string) time.Duration {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(q.Get("timeoutSeconds"))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(n) * time.Second
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
