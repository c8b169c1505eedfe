package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// steadySession records pcaptest.SteadyWatch (an informer's LIST, then a
// watch of n events gap apart) into a session file and returns its path.
func steadySession(t testing.TB, n int, gap time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	b := pcaptest.New()
	pcaptest.SteadyWatch(b, n, gap, 1024)
	pcap := filepath.Join(dir, "steady.pcap")
	if err := os.WriteFile(pcap, b.Pcap(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "steady.wt")
	var o, e strings.Builder
	if code := run([]string{"record", "--pcap", pcap, "-o", out}, strings.NewReader(""), &o, &e); code != 0 {
		t.Fatalf("record: exit %d: %s", code, e.String())
	}
	return out
}

// steadyWatch is the watch of steadySession.
const steadyWatch = "/api/v1/namespaces/steady/configmaps?allowWatchBookmarks=true&resourceVersion=1000&timeoutSeconds=3600&watch=true"

// watchResult is how one watch client's stream went.
type watchResult struct {
	events int
	err    error // io.EOF: a clean end
}

// rawWatch sends GET target over HTTP/1.1 on a connection of its own and
// returns once the response head is in; read reads the body to its end.
type rawWatch struct {
	c    net.Conn
	resp *http.Response
}

func openRawWatch(t *testing.T, base, target string) *rawWatch {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %s", resp.Status)
	}
	return &rawWatch{c: c, resp: resp}
}

// readEvents reads newline-ended JSON events from body until it ends.
func readEvents(body io.Reader) watchResult {
	br := bufio.NewReader(body)
	var r watchResult
	for {
		_, err := br.ReadSlice('\n')
		if err != nil {
			r.err = err
			return r
		}
		r.events++
	}
}

// TestReplaySIGTERM: SIGTERM with 100 open watches — over HTTP/1.1, and
// over HTTP/2 (TLS) — ends every one cleanly (the terminating chunk;
// END_STREAM), exits 0, and leaves --out closed cleanly with every
// exchange.
func TestReplaySIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process with 100 watches")
	}
	session := steadySession(t, 600, 100*time.Millisecond) // a minute of events
	for _, h2 := range []bool{false, true} {
		name := map[bool]string{false: "http1", true: "h2"}[h2]
		t.Run(name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run.wt")
			args := []string{"replay", session, "--listen", "127.0.0.1:0", "--out", run, "--shutdown-grace", "30s"}
			if h2 {
				args = append(args, "--tls")
			}
			c := startChild(t, args...)
			base := waitMatch(t, c.errw.lines, `^Listening on (https?://127\.0\.0\.1:\d+)`, c.errw.String)[1]
			const watchers = 100
			results := make([]watchResult, watchers)
			var wg sync.WaitGroup
			if h2 {
				client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
				t.Cleanup(client.CloseIdleConnections)
				for i := range watchers {
					resp, err := client.Get(base + steadyWatch)
					if err != nil {
						t.Fatal(err)
					}
					if resp.ProtoMajor != 2 {
						t.Fatalf("watch over %s; want HTTP/2", resp.Proto)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer resp.Body.Close()
						results[i] = readEvents(resp.Body)
					}()
				}
			} else {
				for i := range watchers {
					w := openRawWatch(t, base, steadyWatch)
					wg.Add(1)
					go func() {
						defer wg.Done()
						results[i] = readEvents(w.resp.Body)
					}()
				}
			}
			time.Sleep(500 * time.Millisecond) // a few events each
			c.signal(t, syscall.SIGTERM)
			if code := c.wait(t); code != 0 {
				t.Fatalf("replay exit %d after SIGTERM; want 0:\n%s", code, c.errw.String())
			}
			wg.Wait()
			total := 0
			for i, r := range results {
				if r.err != io.EOF || r.events == 0 {
					t.Errorf("watch %d ended with %v after %d events; want events, then a clean end", i, r.err, r.events)
				}
				total += r.events
			}
			t.Logf("%d watchers got %d events, then a clean end", watchers, total)
			if !strings.Contains(c.errw.String(), "Stopping: ending open watches cleanly") {
				t.Errorf("no stopping line:\n%s", c.errw.String())
			}
			stdout, stderr, code := wtrace(t, "inspect", run)
			if code != 0 || !strings.Contains(stdout, "closed cleanly") || !strings.Contains(stdout, fmt.Sprintf("%d exchanges", watchers)) {
				t.Errorf("inspect --out: exit %d, %s\n%s", code, stderr, stdout)
			}
			if _, stderr, code := wtrace(t, "verify", run); code != 0 {
				t.Errorf("verify --out: exit %d: %s", code, stderr)
			}
		})
	}
}

// TestReplayJSONLog: --log-format json writes one JSON object a line on
// stderr (log/slog's: time, level, msg, attributes), the banner included,
// and stdout stays empty; /readyz and /metrics answer.
func TestReplayJSONLog(t *testing.T) {
	session := steadySession(t, 10, 10*time.Millisecond)
	c := startChild(t, "replay", session, "--listen", "127.0.0.1:0", "--log-format", "json", "--speed", "0", "--writes", "reject")
	m := waitMatch(t, c.errw.lines, `"msg":"replay: serving".*"url":"(http://127\.0\.0\.1:\d+)"`, c.errw.String)
	base := m[1]
	for _, p := range []string{"/readyz", "/livez", "/healthz", "/metrics"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || p != "/metrics" && string(b) != "ok" || p == "/metrics" && !strings.Contains(string(b), "wtrace_replay_sessions_loaded_total 1") {
			t.Errorf("GET %s = %d %.200q", p, resp.StatusCode, b)
		}
	}
	w := openRawWatch(t, base, steadyWatch)
	if r := readEvents(w.resp.Body); r.err != io.EOF || r.events != 10 {
		t.Errorf("watch: %d events, %v", r.events, r.err)
	}
	waitMatch(t, c.errw.lines, `"msg":"replay: request".*"how":"recorded"`, c.errw.String)
	c.signal(t, syscall.SIGTERM)
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, c.errw.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(c.errw.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil || rec["time"] == nil {
			t.Errorf("not a log/slog JSON line: %q (%v)", l, err)
		}
	}
}

// TestServiceUsage: --log-format takes text or json.
func TestServiceUsage(t *testing.T) {
	_, stderr, code := wtrace(t, "replay", "x.wt", "--log-format", "xml")
	if code != 2 || !strings.Contains(stderr, "--log-format") {
		t.Errorf("exit %d, %q; want 2 and a hint", code, stderr)
	}
	if !errors.Is(checkLogFormat("json"), nil) {
		t.Error("json refused")
	}
}
