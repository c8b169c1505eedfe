package replay

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardWriter is a ResponseWriter that keeps nothing: the benchmarks
// measure the server's work, not a client's.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *discardWriter) Flush()                      {}

// BenchmarkSynthWrite is the server-side cost of a write the replay
// answers from its world, through ServeHTTP (routing, the recorded writes
// compared, the store, the answer encoded, the request log): a create of a
// small ConfigMap, and a JSON merge patch of a recorded one.
func BenchmarkSynthWrite(b *testing.B) {
	path := corpusSession(b, "basic-json")
	for _, c := range []struct {
		name, method, ct string
		target           func(i int) string
		body             func(i int) string
	}{
		{"create", "POST", "application/json",
			func(int) string { return "/api/v1/namespaces/corpus-basic/configmaps" },
			func(i int) string {
				return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench-%d","labels":{"app":"bench"}},"data":{"k":"v"}}`, i)
			}},
		{"merge-patch", "PATCH", "application/merge-patch+json",
			func(int) string { return "/api/v1/namespaces/corpus-basic/configmaps/bench-target" },
			func(i int) string { return fmt.Sprintf(`{"metadata":{"annotations":{"n":"%d"}}}`, i) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv, err := Open(path, Options{Writes: WritesReject, MaxRequests: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			// The world at the end of the recording, with the patched object.
			srv.store.ObserveN(1 << 40)
			w := &discardWriter{h: http.Header{}}
			req := httptest.NewRequest("POST", "/api/v1/namespaces/corpus-basic/configmaps",
				strings.NewReader(`{"metadata":{"name":"bench-target"},"data":{"k":"v"}}`))
			req.Header.Set("Content-Type", "application/json")
			srv.ServeHTTP(w, req)
			if w.code != 201 {
				b.Fatalf("create bench-target: %d", w.code)
			}
			reqs := make([]*http.Request, b.N)
			size := 0
			for i := range reqs {
				body := c.body(i)
				size += len(body)
				reqs[i] = httptest.NewRequest(c.method, c.target(i), strings.NewReader(body))
				reqs[i].Header.Set("Content-Type", c.ct)
				reqs[i].Header.Set("Accept", "application/json")
			}
			b.SetBytes(int64(size / max(b.N, 1)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := &discardWriter{h: http.Header{}}
				srv.ServeHTTP(w, reqs[i])
				if w.code != 200 && w.code != 201 {
					b.Fatalf("%s: %d", c.name, w.code)
				}
			}
		})
	}
}

// BenchmarkWatchEvents is the server-side cost per event of a recorded
// watch (basic-json's 200 events, or the protobuf recording's 201) served
// through ServeHTTP as fast as possible: as recorded, and transcoded for a
// client that asks for another encoding (each event read from the file,
// decoded and encoded again).
func BenchmarkWatchEvents(b *testing.B) {
	for _, c := range []struct {
		name, scenario, target, accept string
	}{
		{"json-as-recorded", "basic-json", "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", "application/json"},
		{"json-to-protobuf", "basic-json", "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", "application/vnd.kubernetes.protobuf"},
		{"json-to-table", "basic-json", "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205", "application/json;as=Table;v=v1;g=meta.k8s.io"},
		{"protobuf-as-recorded", "protobuf", "/api/v1/namespaces/corpus-proto/configmaps?watch=true&resourceVersion=206", "application/vnd.kubernetes.protobuf"},
		{"protobuf-to-json", "protobuf", "/api/v1/namespaces/corpus-proto/configmaps?watch=true&resourceVersion=206", "application/json"},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv, err := Open(corpusSession(b, c.scenario), Options{Writes: WritesReject, MaxRequests: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			events, bytesOut := 0, 0
			serve := func() {
				req := httptest.NewRequest("GET", c.target, nil)
				req.Header.Set("Accept", c.accept)
				w := &discardWriter{h: http.Header{}}
				srv.ServeHTTP(w, req)
				bytesOut = w.n
			}
			serve()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", c.target, nil)
			req.Header.Set("Accept", c.accept)
			srv.ServeHTTP(rec, req)
			events = bytes.Count(rec.Body.Bytes(), []byte("\n"))
			if c.accept != "application/json" && !strings.Contains(c.accept, "as=Table") {
				events = 200 // protobuf: no newlines to count
				if c.scenario == "protobuf" {
					events = 201
				}
			}
			b.SetBytes(int64(bytesOut))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				serve()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}
