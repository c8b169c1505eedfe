package replay

import (
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/internal/tape"

	"net/http"
	"testing"
)

// step is one request of a matching scenario and how it must be answered.
type step struct {
	method, target string
	how            string
	exchange       int64 // -1: none
	status         int
}

func runSteps(t *testing.T, srv *Server, steps []step) {
	t.Helper()
	for i, s := range steps {
		method := s.method
		if method == "" {
			method = "GET"
		}
		q, err := tape.ParseTarget(method, s.target)
		if err != nil {
			t.Fatalf("step %d: parseTarget(%q): %v", i, s.target, err)
		}
		rt := srv.route(requestFor(method, s.target, ""), q, nil)
		id := int64(-1)
		if rt.Recorded {
			id = rt.Exchange
		}
		if rt.How != s.how || id != s.exchange || rt.Status != s.status {
			t.Errorf("step %d: %s %s → %s #%d %d; want %s #%d %d", i, method, s.target, rt.How, id, rt.Status, s.how, s.exchange, s.status)
		}
	}
}

// TestMatching walks request sequences through the matcher against real
// sessions (exchange numbers as `wtrace inspect` shows them).
func TestMatching(t *testing.T) {
	const cm = "/api/v1/namespaces/corpus-multi/configmaps"
	const sec = "/api/v1/namespaces/corpus-multi/secrets"
	const svc = "/api/v1/namespaces/corpus-multi/services"
	const ns = "/api/v1/namespaces"
	t.Run("multi-watch", func(t *testing.T) {
		srv, err := Open(corpusSession(t, "multi-watch"), Options{Writes: WritesRecorded})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		runSteps(t, srv, []step{
			// An informer's LIST (any RV, any limit) then WATCH from its RV.
			{"", cm + "?limit=500&resourceVersion=0", howRecorded, 2, 200},
			{"", cm + "?watch=true&resourceVersion=423&allowWatchBookmarks=true&timeoutSeconds=300", howRecorded, 6, 200},
			// Parameter order, watch=1 and the legacy watch path do not matter.
			{"", cm + "?resourceVersion=423&watch=1", howRecorded, 6, 200},
			{"", "/api/v1/watch/namespaces/corpus-multi/configmaps?resourceVersion=423", howRecorded, 6, 200},
			// A recorded streaming list.
			{"", cm + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", howRecorded, 4, 200},
			// Pagination follows continue tokens; an unknown token is 410.
			{"", sec + "?limit=500", howRecorded, 8, 200},
			{"", sec + "?limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTQxLCJzdGFydCI6Ii9zZWMtMDA0NVx1MDAwMCJ9", howRecorded, 9, 200},
			{"", sec + "?limit=500&continue=bogus", howExpired, -1, 410},
			{"", sec + "?limit=4", howRecorded, 8, 200},
			// Selectors must match.
			{"", sec + "?watch=true&labelSelector=app%3Dtracked", howRecorded, 5, 200},
			{"", sec + "?watch=true&labelSelector=app%3Dother", howNotFound, -1, 404},
			{"", ns + "?labelSelector=corpus%3Dmulti", howRecorded, 3, 200},
			{"", ns + "?labelSelector=corpus%3Dmulti&watch=true&resourceVersion=423", howRecorded, 7, 200},
			{"", ns, howNotFound, -1, 404},
			// Watches from "" / "0" prefer the recorded watch from "" / "0".
			{"", svc + "?watch=true&resourceVersion=0", howRecorded, 1, 200},
			{"", svc + "?watch=true", howRecorded, 1, 200},
			{"", svc + "?watch=true&resourceVersion=617", howRecorded, 12, 200},
			// RVs past the session, unknown, older or not numeric.
			{"", svc + "?watch=true&resourceVersion=99999999", howAfterLast, 12, 200},
			{"", svc + "?watch=true&resourceVersion=1", howExpired, -1, 200},
			// Not a number: kube-apiserver's 500 (TestWatchInvalidRV).
			{"", svc + "?watch=true&resourceVersion=abc", howError, -1, 500},
			// A streaming list of namespaces is synthesized from LIST #3
			// (+ WATCH #7).
			{"", ns + "?labelSelector=corpus%3Dmulti&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", howWatchList, 3, 200},
			// Other methods, paths, discovery.
			{"POST", cm, howNotFound, -1, 404},
			{"", "/api/v1/namespaces/corpus-multi/pods", howNotFound, -1, 404},
			{"", "/api", howDiscovery, -1, 200},
			{"", "/apis", howDiscovery, -1, 200},
			{"", "/api/v1", howDiscovery, -1, 200},
			{"", "/version?timeout=32s", howDiscovery, -1, 200},
			{"", "/apis/apps/v1", howNotFound, -1, 404},
		})
	})
	// With the world (read-only), what the recording cannot answer the
	// store does; recorded exchanges are matched as before.
	t.Run("multi-watch-world", func(t *testing.T) {
		srv, err := Open(corpusSession(t, "multi-watch"), Options{Writes: WritesReject})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		runSteps(t, srv, []step{
			{"", cm + "?limit=500&resourceVersion=0", howRecorded, 2, 200},
			{"", cm + "?watch=true&resourceVersion=423&allowWatchBookmarks=true&timeoutSeconds=300", howRecorded, 6, 200},
			{"", sec + "?limit=500&continue=bogus", howExpired, -1, 410},
			{"", sec + "?watch=true&labelSelector=app%3Dtracked", howRecorded, 5, 200},
			{"", sec + "?watch=true&labelSelector=app%3Dother", world.HowWatch, -1, 200},
			{"", ns, world.HowList, -1, 200},
			{"", svc + "?watch=true&resourceVersion=99999999", howAfterLast, 12, 200},
			{"", svc + "?watch=true&resourceVersion=1", world.HowWatch, -1, 200}, // the store's 410 ERROR event
			{"", svc + "?watch=true&resourceVersion=abc", howError, -1, 500},
			{"POST", cm, howRejected, -1, 403}, // read-only
			{"", "/api/v1/namespaces/corpus-multi/pods", world.HowList, -1, 200},
			{"", "/api/v1/namespaces/corpus-multi/pods/nope", world.HowError, -1, 404},
			{"", "/apis/apps/v1", howDiscovery, -1, 200},
			{"", "/apis/example.com/v1/widgets", howNotFound, -1, 404},
		})
	})
	t.Run("gone-410", func(t *testing.T) {
		srv, err := Open(corpusSession(t, "gone-410"), Options{Writes: WritesReject})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		const pt = "/api/v1/namespaces/corpus-gone/podtemplates"
		const gcm = "/api/v1/namespaces/corpus-gone/configmaps"
		runSteps(t, srv, []step{
			// The recorded 410 for a stale RV, then the relist and watch.
			{"", pt + "?watch=true&resourceVersion=895", howRecorded, 0, 200},
			{"", pt, howRecorded, 1, 200},
			{"", pt + "?watch=true&resourceVersion=911", howRecorded, 2, 200},
			// Three recorded watches from RV 911: successive requests get
			// them in recorded order, then the last again.
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 5, 200},
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 6, 200},
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 7, 200},
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 7, 200},
		})
	})
	t.Run("loop-wraps-cursors", func(t *testing.T) {
		srv, err := Open(corpusSession(t, "gone-410"), Options{Writes: WritesReject, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		const gcm = "/api/v1/namespaces/corpus-gone/configmaps"
		runSteps(t, srv, []step{
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 5, 200},
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 6, 200},
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 7, 200},
			{"", gcm + "?watch=true&resourceVersion=911", howRecorded, 5, 200},
		})
	})
}

// TestResume: a watch from the resourceVersion of a recorded event gets
// the rest of that watch, byte for byte; from the last event, an empty
// stream that stays open.
func TestResume(t *testing.T) {
	path := corpusSession(t, "basic-json")
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	evs := sessionEvents(t, f, id)
	srv := newTestServer(t, path, Options{Writes: WritesReject})
	const w = "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion="
	k := 150
	rv := evs[k].meta.ResourceVersion
	r := rawGet(t, srv.URL, w+rv)
	b, err := r.body()
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, e := range evs[k+1:] {
		want = append(append(want, '\n'), e.data...)
	}
	want = append(want, '\n')
	if string(b) != string(want) {
		t.Fatalf("watch from RV %s (event %d) = %d bytes; want the %d events after it (%d bytes)", rv, k, len(b), len(evs)-k-1, len(want))
	}
	q, _ := tape.ParseTarget(http.MethodGet, w+evs[len(evs)-1].meta.ResourceVersion)
	if rt := srv.route(requestFor(http.MethodGet, w+evs[len(evs)-1].meta.ResourceVersion, ""), q, nil); rt.How != howAfterLast {
		t.Errorf("watch from the last event's RV: %s; want %s", rt.How, howAfterLast)
	}
}

// TestMatchingAccept: among recorded watches that match equally, a client
// gets the one whose Content-Type its Accept header asks for (the tls-h2
// session, recorded over HTTP/2, holds a JSON and a protobuf watch of
// configmaps from the same resourceVersion).
func TestMatchingAccept(t *testing.T) {
	srv, err := Open(corpusSession(t, "tls-h2"), Options{Writes: WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f := srv.file
	jsonWatch := exchangeByTarget(t, f, "GET", "configmaps?watch=true&resourceVersion=1064")
	pbWatch := exchangeByTarget(t, f, "GET", "configmaps?resourceVersion=1064&timeout=")
	const target = "/api/v1/namespaces/corpus-tls/configmaps?watch=true&resourceVersion=1064"
	for i, c := range []struct {
		accept string
		want   int64
	}{
		{"", jsonWatch}, {"*/*", jsonWatch}, {"application/json, */*", jsonWatch},
		{"application/vnd.kubernetes.protobuf, */*", pbWatch}, {"application/vnd.kubernetes.protobuf;stream=watch", pbWatch},
		{"", jsonWatch},
	} {
		q, _ := tape.ParseTarget("GET", target)
		q.Accept = c.accept
		if rt := srv.route(requestFor("GET", target, c.accept), q, nil); !rt.Recorded || rt.Exchange != c.want {
			t.Errorf("%d: Accept %q → %+v; want exchange %d", i, c.accept, rt, c.want)
		}
	}
}
