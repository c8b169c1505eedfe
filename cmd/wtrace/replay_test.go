package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestReplayOut runs `wtrace replay --writes apply --out run.wt` in a
// child process, sends it a watch, a create and a patch, stops it with
// SIGINT, and reads run.wt with inspect and events: a session of source
// "replay" holding the requests, their bodies and the answers.
func TestReplayOut(t *testing.T) {
	dir := t.TempDir()
	session := filepath.Join(dir, "s.wt")
	recordScenario(t, "basic-json", session)
	run := filepath.Join(dir, "run.wt")
	c := startChild(t, "replay", session, "--listen", "127.0.0.1:0", "--speed", "0", "--writes", "apply", "--out", run)
	base := waitMatch(t, c.errw.lines, `^Listening on (http://127\.0\.0\.1:\d+)`, c.errw.String)[1]
	do := func(method, target, ct, body string) (int, string) {
		req, _ := http.NewRequest(method, base+target, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	if code, _ := do("GET", cms+"?watch=true&resourceVersion=205&timeoutSeconds=30", "", ""); code != 200 {
		t.Fatalf("watch: %d", code)
	}
	if code, b := do("POST", cms, "application/json", `{"metadata":{"name":"cli-cm"},"data":{"k":"v"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	if code, b := do("PATCH", cms+"/cli-cm", "application/merge-patch+json", `{"data":{"k":"w"}}`); code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	waitMatch(t, c.errw.lines, `PATCH /api/v1/namespaces/corpus-basic/configmaps/cli-cm how=synth-patch status=200`, c.errw.String)
	c.signal(t, syscall.SIGINT)
	if code := c.wait(t); code != 0 {
		t.Fatalf("replay exit %d:\n%s", code, c.errw.String())
	}
	if !strings.Contains(c.errw.String(), "Recorded the run: 3 exchanges, 200 watch events into "+run) {
		t.Errorf("no summary of the run:\n%s", c.errw.String())
	}
	wttest.CheckNoSecrets(t, run)
	stdout, stderr, code := wtrace(t, "inspect", run)
	for _, want := range []string{"from replay", "closed cleanly", "3 exchanges, 200 watch events",
		"POST /api/v1/namespaces/corpus-basic/configmaps", "→ 201 Created", "PATCH /api/v1/namespaces/corpus-basic/configmaps/cli-cm"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect lacks %q (exit %d, %s):\n%s", want, code, stderr, stdout)
		}
	}
	stdout, _, code = wtrace(t, "events", run)
	if evs := parseEvents(t, stdout); code != 0 || len(evs) != 200 || evs[0].Name != "cm-0004" || evs[0].ResourceVersion != "206" {
		t.Errorf("events of the run: exit %d, %d events; want the 200 served", code, len(evs))
	}
}

// TestReplayUsage: --writes takes a mode; --keep-secrets needs --out.
func TestReplayUsage(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "x.wt", "--writes", "maybe"},
		{"replay", "x.wt", "--keep-secrets"},
	} {
		_, stderr, code := wtrace(t, args...)
		if code != 2 || !strings.Contains(stderr, "See 'wtrace replay --help'") {
			t.Errorf("%v: exit %d, %q; want 2 and a hint", args, code, stderr)
		}
	}
}
