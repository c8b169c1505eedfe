package wtracetest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// binary returns the wtrace binary of the tests, or skips them.
func binary(t *testing.T) string {
	t.Helper()
	b, err := Binary(Options{})
	if err != nil {
		t.Skipf("%v", err)
	}
	return b
}

// corpusSession records the repository's basic-json capture (a LIST and a
// 200-event watch of ConfigMaps) with the binary.
func corpusSession(t *testing.T, bin string) string {
	t.Helper()
	pcap := filepath.Join("..", "testdata", "corpus", "basic-json", "capture.pcap")
	if _, err := os.Stat(pcap); err != nil {
		t.Skipf("the corpus capture: %v", err)
	}
	out := filepath.Join(t.TempDir(), "basic.wt")
	if b, err := exec.Command(bin, "record", "--pcap", pcap, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wtrace record: %v\n%s", err, b)
	}
	return out
}

// TestStart: a replay started as a process serves the session (a watch
// gets its 200 events, over HTTP and HTTPS with the CA given), its
// kubeconfig names it, its controls answer — settle, the environment,
// the requests — and Stop ends it cleanly with the run's file complete.
func TestStart(t *testing.T) {
	bin := binary(t)
	session := corpusSession(t, bin)
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tlsOn], func(t *testing.T) {
			r := Start(t, session, Options{TLS: tlsOn, Args: []string{"--speed", "0"}})
			if tlsOn != strings.HasPrefix(r.URL, "https://") || tlsOn != (r.CAPEM != nil) {
				t.Fatalf("URL %s, CA %d bytes", r.URL, len(r.CAPEM))
			}
			kc, err := os.ReadFile(r.Kubeconfig)
			if err != nil || !strings.Contains(string(kc), r.URL) {
				t.Errorf("kubeconfig %s: %v\n%s", r.Kubeconfig, err, kc)
			}
			resp, err := r.client.Get(r.URL + "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=2")
			if err != nil {
				t.Fatal(err)
			}
			events := 0
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				events++
			}
			resp.Body.Close()
			if err := sc.Err(); err != nil || events == 0 {
				t.Errorf("the watch: %d events, %v", events, err)
			}
			if !r.Settle(200*time.Millisecond, time.Minute) {
				t.Error("the run did not settle within a minute")
			}
			if !r.EnvironmentDone(time.Minute) {
				t.Errorf("the environment was not played: %+v", r.Environment())
			}
			reqs := r.Requests()
			if len(reqs) == 0 || !strings.Contains(reqs[len(reqs)-1].Target, "watch=true") || reqs[len(reqs)-1].Status != http.StatusOK {
				t.Errorf("requests %+v; want the watch, answered 200", reqs)
			}
			if w := r.Writes(); len(w) != 0 {
				t.Errorf("writes %+v; want none", w)
			}
			run := r.Stop()
			if st, err := os.Stat(run); err != nil || st.Size() == 0 {
				t.Fatalf("the run %s: %v", run, err)
			}
			out, err := exec.Command(bin, "inspect", run).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "closed cleanly") {
				t.Errorf("wtrace inspect of the run: %v\n%s", err, out)
			}
			if r.Stop() != run {
				t.Error("a second Stop")
			}
		})
	}
}

// TestStartFails: a session the replay cannot load fails with what the
// replay said.
func TestStartFails(t *testing.T) {
	bin := binary(t)
	bad := filepath.Join(t.TempDir(), "bad.wt")
	os.WriteFile(bad, []byte("not a session"), 0o644)
	ft := &fakeT{TB: t}
	func() {
		defer func() { recover() }()
		Start(ft, bad, Options{Binary: bin})
	}()
	if !strings.Contains(ft.msg, "exited") || !strings.Contains(ft.msg, "not a wtrace session file") {
		t.Errorf("Start of a bad session failed with %q", ft.msg)
	}
	if _, err := Binary(Options{Binary: ""}); err != nil && !strings.Contains(err.Error(), Install) {
		t.Errorf("Binary: %v; want the install hint", err)
	}
}

// fakeT records the first fatal message (Fatal panics to end the call).
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	if f.msg == "" {
		f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	}
	panic("fatal")
}

func (f *fakeT) Fatal(args ...any) { f.Fatalf("%v", args...) }
