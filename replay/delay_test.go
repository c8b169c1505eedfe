package replay_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
)

// TestShutdownDelay: during Options.ShutdownDelay the server goes on
// serving new clients (a new connection's LIST answered) while /readyz
// answers 500 with the failed shutdown check; then the port closes.
func TestShutdownDelay(t *testing.T) {
	path := replay.CorpusSession(t, "basic-json")
	srv := replaytest.NewServer(t, path, replay.Options{Speed: 0, Writes: replay.WritesReject, ShutdownDelay: time.Minute})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(p string) (int, string, error) {
		resp, err := c.Get(srv.URL + p)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := get("/readyz?verbose")
		if err != nil {
			t.Fatalf("GET /readyz during the delay: %v; want an answer", err)
		}
		if code == http.StatusInternalServerError {
			if !strings.Contains(body, "[-]shutdown failed") {
				t.Errorf("/readyz while draining: %q", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz still passes a minute after Shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, p := range []string{"/api/v1/namespaces/corpus-basic/configmaps", "/livez"} {
		if code, _, err := get(p); err != nil || code != 200 {
			t.Errorf("GET %s during the delay: %d, %v; want 200", p, code, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned during its delay: %v", err)
	default:
	}
	cancel() // the delay counts in Shutdown's context
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Shutdown did not return a minute after its context ended")
	}
	if _, _, err := get("/livez"); err == nil {
		t.Error("the port still answers after Shutdown")
	}
}
