package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/live"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// Credentials the record tests use; none may reach a session.
const (
	recClientToken = "record-client-token-51c7e0"
	recKubeToken   = "record-kubeconfig-token-2b9f3d"
	recSecret      = "record-secret-value-a66d10"
)

func TestRecordUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "-o", "x.wt"}, "exactly one source"},
		{[]string{"record", "--pcap", "x.pcap", "--proxy", "-o", "x.wt"}, "exactly one source"},
		{[]string{"record", "--iface", "lo", "--proxy", "-o", "x.wt"}, "exactly one source"},
		{[]string{"record", "--proxy"}, "-o OUT.wt is required"},
		{[]string{"record", "--pcap", "x.pcap", "--host", "1.2.3.4", "-o", "x.wt"}, "--host goes with --iface"},
		{[]string{"record", "--proxy", "--pcap-out", "x.pcap", "-o", "x.wt"}, "--pcap-out goes with --iface"},
		{[]string{"record", "--proxy", "--capture-sha256", "-o", "x.wt"}, "--capture-sha256 goes with --pcap"},
		{[]string{"record", "--iface", "lo", "--listen", ":1", "-o", "x.wt"}, "--listen goes with --proxy"},
		{[]string{"record", "--iface", "lo", "--kubeconfig", "kc", "-o", "x.wt"}, "--kubeconfig goes with --proxy"},
		{[]string{"record", "--proxy", "--port", "8001", "-o", "x.wt"}, "--port does not apply to --proxy"},
		{[]string{"record", "--proxy", "--keylog", "k.log", "-o", "x.wt"}, "--keylog goes with --pcap or --iface"},
		{[]string{"record", "--pcap", "x.pcap", "--max-size", "1GiB", "-o", "x.wt"}, "live recordings"},
		{[]string{"record", "--pcap", "x.pcap", "--rotate", "-o", "x.wt"}, "live recordings"},
		{[]string{"record", "--proxy", "--rotate", "-o", "x.wt"}, "--rotate needs --max-size or --max-duration"},
		{[]string{"record", "--proxy", "--rotate", "--max-size", "1GB", "-o", "-"}, "numbered files"},
		{[]string{"record", "--proxy", "--max-size", "lots", "-o", "x.wt"}, "not a size"},
		{[]string{"record", "--proxy", "--max-duration", "soon", "-o", "x.wt"}, "invalid argument"},
		{[]string{"record", "--iface", "lo", "--port", "70000", "-o", "x.wt"}, "not a TCP port"},
		{[]string{"record", "--iface", "lo", "--pcap-out", "x.wt", "-o", "x.wt"}, "must differ"},
	} {
		_, stderr, code := wtrace(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("wtrace %q: exit %d, stderr %q; want exit 2 with %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestRecordHelp(t *testing.T) {
	stdout, _, code := wtrace(t, "record", "--help")
	for _, want := range []string{"--pcap capture.pcap", "--iface lo --port 8001", "record --proxy", "--max-size 2GiB", "s-0001.wt", "CAP_NET_RAW", "--keep-secrets"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("record --help lacks %q (exit %d)", want, code)
		}
	}
}

// fakeAPIServer is an apiserver stand-in: it checks the kubeconfig's token
// and serves /version, a LIST and watches of JSON events (some Secrets),
// flushing after each; with hang set, watches then stay open.
type fakeAPIServer struct {
	*httptest.Server
	events []string
	hang   bool
}

func newFakeAPIServer(t *testing.T, events []string, hang bool, plain ...bool) *fakeAPIServer {
	a := &fakeAPIServer{events: events, hang: hang}
	// HTTPS (client-go sends credentials only over TLS), with HTTP/2.
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+recKubeToken {
			http.Error(w, "who are you: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "" {
			io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[]}`)
			return
		}
		for _, e := range a.events {
			if _, err := io.WriteString(w, e+"\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		if a.hang {
			<-r.Context().Done()
		}
	}))
	if len(plain) > 0 && plain[0] {
		a.Start()
	} else {
		a.EnableHTTP2 = true
		a.StartTLS()
	}
	t.Cleanup(a.Close)
	return a
}

// recEvents returns n watch events, one in four a Secret, the others
// configmaps with about pad bytes of incompressible data.
func recEvents(n, pad int) []string {
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, pad+64)
	var evs []string
	for i := range n {
		if i%4 == 1 {
			evs = append(evs, fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s-%d","namespace":"demo","resourceVersion":"%d"},"data":{"password":"%s"}}}`,
				i, 10+i, base64.StdEncoding.EncodeToString([]byte(recSecret))))
			continue
		}
		evs = append(evs, fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"demo","resourceVersion":"%d"},"data":{"v":"%s"}}}`,
			i, 10+i, base64.StdEncoding.EncodeToString(noise[:(pad+i%50)*3/4])))
		for j := range noise {
			noise[j] = byte(rnd.Uint32())
		}
	}
	return evs
}

func writeKubeconfig(t *testing.T, server string, ca ...*x509.Certificate) string {
	t.Helper()
	caData := ""
	if len(ca) > 0 {
		caData = ", certificate-authority-data: " + base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca[0].Raw}))
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q%s}
users:
- name: u
  user: {token: %s}
contexts:
- name: fake
  context: {cluster: fake, user: u}
current-context: fake
`, server, caData, recKubeToken)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecrets checks a session produced by these tests.
func noSecrets(t *testing.T, path string) {
	t.Helper()
	wttest.CheckNoSecrets(t, path, recClientToken, recKubeToken, recSecret, base64.StdEncoding.EncodeToString([]byte(recSecret)))
}

// sessionFrames returns the Data of every Frame readable in a session
// (damage skipped), and whether it was closed cleanly.
// countFrames counts the events of a session file being written, 0 while
// it cannot be read yet.
func countFrames(path string) int {
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	for r := range f.Records().All() {
		if _, ok := r.(*formats.Frame); ok {
			n++
		}
	}
	return n
}

func sessionFrames(t *testing.T, path string) ([]string, *formats.Index) {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatalf("formats.Open(%s): %v", path, err)
	}
	defer f.Close()
	var out []string
	for r, err := range f.Records().All() {
		var de *formats.DamageError
		if errors.As(err, &de) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if fr, ok := r.(*formats.Frame); ok {
			out = append(out, string(fr.Data))
		}
	}
	return out, f.Index()
}

// checkEvents compares recorded frames with what was sent: Secrets
// redacted (same length), the rest byte for byte.
func checkEvents(t *testing.T, got, sent []string) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("%d events recorded; want %d", len(got), len(sent))
	}
	for i, e := range sent {
		if strings.Contains(e, `"kind":"Secret"`) {
			if got[i] == e || len(got[i]) != len(e) {
				t.Errorf("Secret event %d = %q; want it redacted, same length", i, got[i])
			}
		} else if got[i] != e {
			t.Errorf("event %d = %q; want %q", i, got[i], e)
		}
	}
}

// lineWriter collects what a command writes to stderr, line by line, for
// a test waiting for a line.
type lineWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	lines chan string
	part  string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 1000)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.part += string(p)
	for {
		i := strings.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		select {
		case w.lines <- w.part[:i]:
		default:
		}
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitMatch waits for a line matching re and returns its submatches.
func waitMatch(t *testing.T, lines <-chan string, re string, all func() string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l := <-lines:
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %q within a minute; output:\n%s", re, all())
		}
	}
}

var proxyBanner = `^Proxying (http://127\.0\.0\.1:\d+) → `

// watchThrough runs a watch through the proxy at base, with the client's
// own token, and returns the events it read (n of them, then it stops
// reading and closes, unless n < 0: all).
func watchThrough(t *testing.T, base string, n int) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=9", nil)
	req.Header.Set("Authorization", "Bearer "+recClientToken)
	req.Header.Set("Cookie", "session="+recClientToken)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("watch through the proxy: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch through the proxy: %s %s", resp.Status, b)
	}
	br := bufio.NewReader(resp.Body)
	var evs []string
	for n < 0 || len(evs) < n {
		l, err := br.ReadString('\n')
		if err == io.EOF && n < 0 {
			break
		}
		if err != nil {
			t.Fatalf("reading the watch: %v after %d events", err, len(evs))
		}
		evs = append(evs, strings.TrimSuffix(l, "\n"))
	}
	return evs
}

// waitExit waits for an in-process run to return its exit status.
func waitExit(t *testing.T, done <-chan int, errw *lineWriter) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("the command did not end within a minute:\n%s", errw.String())
	}
	return -1
}

// TestRecordProxyMaxDuration: an in-process `record --proxy` that stops by
// itself at --max-duration, with the watch it proxied in the file.
func TestRecordProxyMaxDuration(t *testing.T) {
	evs := recEvents(25, 100)
	api := newFakeAPIServer(t, evs, false)
	kc := writeKubeconfig(t, api.URL, api.Certificate())
	out := filepath.Join(t.TempDir(), "s.wt")
	errw := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"record", "--proxy", "--kubeconfig", kc, "--listen", "127.0.0.1:0", "--max-duration", "2s", "-o", out}, strings.NewReader(""), io.Discard, errw)
	}()
	base := waitMatch(t, errw.lines, proxyBanner, errw.String)[1]
	if got := watchThrough(t, base, -1); len(got) != len(evs) {
		t.Fatalf("the client read %d events; want %d", len(got), len(evs))
	}
	if code := waitExit(t, done, errw); code != 0 {
		t.Fatalf("record --proxy: exit %d:\n%s", code, errw.String())
	}
	got, idx := sessionFrames(t, out)
	checkEvents(t, got, evs)
	if idx.Summary == nil || idx.Summary.Note != "max-duration reached" || idx.Meta.Source != "proxy" || idx.Meta.Redaction != "default" {
		t.Errorf("summary %+v, meta %+v", idx.Summary, idx.Meta)
	}
	if !strings.Contains(errw.String(), "Recorded proxy") || !strings.Contains(errw.String(), "25 watch events; max-duration reached") {
		t.Errorf("summary paragraph:\n%s", errw.String())
	}
	noSecrets(t, out)
}

// TestRecordProxyMaxSize: --max-size without --rotate ends the recording.
func TestRecordProxyMaxSize(t *testing.T) {
	evs := recEvents(3000, 400)
	api := newFakeAPIServer(t, evs, true)
	kc := writeKubeconfig(t, api.URL, api.Certificate())
	out := filepath.Join(t.TempDir(), "s.wt")
	errw := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"record", "--proxy", "--kubeconfig", kc, "--listen", "127.0.0.1:0", "--max-size", "64KiB", "-o", out}, strings.NewReader(""), io.Discard, errw)
	}()
	base := waitMatch(t, errw.lines, proxyBanner, errw.String)[1]
	go func() {
		// The watch hangs after its events; the recording ends it.
		req, _ := http.NewRequest("GET", base+"/api/v1/pods?watch=true", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	if code := waitExit(t, done, errw); code != 0 {
		t.Fatalf("record --proxy: exit %d:\n%s", code, errw.String())
	}
	got, idx := sessionFrames(t, out)
	if idx.Summary == nil || idx.Summary.Note != "max-size reached" || len(got) == 0 {
		t.Errorf("summary %+v with %d events; want max-size reached", idx.Summary, len(got))
	}
	if st, err := os.Stat(out); err != nil || st.Size() < 32<<10 || st.Size() > 4<<20 {
		t.Errorf("file size %v, %v; want about 64 KiB", st.Size(), err)
	}
	noSecrets(t, out)
}

func TestRecordProxyErrors(t *testing.T) {
	dir := t.TempDir()
	noCtx := filepath.Join(dir, "noctx")
	os.WriteFile(noCtx, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: a\n  context: {cluster: a}\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	good := writeKubeconfig(t, "https://127.0.0.1:1")
	for _, tc := range []struct {
		args      []string
		err, hint string
	}{
		{[]string{"--kubeconfig", filepath.Join(dir, "missing")}, "missing", "Try: "},
		{[]string{"--kubeconfig", noCtx}, "has no current context", "Try: choose one with --context"},
		{[]string{"--kubeconfig", good, "--context", "prod"}, `"prod"`, "Try: list the contexts"},
		{[]string{"--kubeconfig", good, "--listen", ln.Addr().String()}, "in use", "Try: another process listens there"},
		{[]string{"--kubeconfig", good, "--listen", "nonsense"}, "nonsense", "Try: check the --listen address"},
	} {
		out := filepath.Join(dir, "s.wt")
		_, stderr, code := wtrace(t, append(append([]string{"record", "--proxy"}, tc.args...), "-o", out)...)
		if code != 1 || !strings.Contains(stderr, tc.err) || !strings.Contains(stderr, tc.hint) {
			t.Errorf("record --proxy %q: exit %d, stderr %q; want exit 1, %q and %q", tc.args, code, stderr, tc.err, tc.hint)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("record --proxy %q left %s behind", tc.args, out)
			os.Remove(out)
		}
	}
}

func TestRecordIfaceErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.wt")
	_, stderr, code := wtrace(t, "record", "--iface", "no-such-if0", "-o", out)
	if code != 1 || !strings.Contains(stderr, "no such network interface") || !strings.Contains(stderr, "Try: list the interfaces") {
		t.Errorf("record --iface no-such-if0: exit %d, stderr %q", code, stderr)
	}
	for _, err := range []error{live.ErrPermission, live.ErrUnsupported, live.ErrLinkType} {
		var he *hintError
		if e := liveError(fmt.Errorf("x: %w", err), "eth9"); !errors.As(e, &he) || he.hint == "" {
			t.Errorf("liveError(%v) = %v; want a hint", err, e)
		}
	}
	var he *hintError
	if e := liveError(live.ErrPermission, "lo"); !errors.As(e, &he) || !strings.Contains(he.hint, "setcap cap_net_raw+ep") || !strings.Contains(he.hint, "--pcap") {
		t.Errorf("hint for ErrPermission: %v", he)
	}
}

// TestRecordIfaceNoCapNetRaw runs `record --iface` without CAP_NET_RAW
// (setpriv drops it from the bounding set of a child process).
func TestRecordIfaceNoCapNetRaw(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not available to drop CAP_NET_RAW")
	}
	out := filepath.Join(t.TempDir(), "s.wt")
	c := exec.Command("setpriv", "--bounding-set=-net_raw", "--", os.Args[0], "-test.run=^TestRecordChild$")
	c.Env = append(os.Environ(), childEnv+"="+childArgs("record", "--iface", "lo", "-o", out))
	b, err := c.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Skipf("setpriv could not run the child: %v %s", err, b)
	}
	if ee.ExitCode() != 1 || !strings.Contains(string(b), "CAP_NET_RAW") || !strings.Contains(string(b), "Try: run as root, or sudo setcap cap_net_raw+ep $(command -v wtrace)") {
		t.Errorf("record --iface without CAP_NET_RAW: exit %d:\n%s", ee.ExitCode(), b)
	}
}

// TestRecordIface records a watch on lo with --pcap-out, stopping at
// --max-duration; the raw packets, recorded with --pcap, give the same
// events.
func TestRecordIface(t *testing.T) {
	if _, err := live.Open("lo", live.Options{}); errors.Is(err, live.ErrPermission) {
		t.Skipf("live capture needs CAP_NET_RAW: %v", err)
	} else if err != nil {
		t.Skipf("no live capture on lo: %v", err)
	}
	evs := recEvents(30, 2000)
	api := newFakeAPIServer(t, evs, false, true)
	port := api.URL[strings.LastIndexByte(api.URL, ':')+1:]
	dir := t.TempDir()
	out, pcap := filepath.Join(dir, "s.wt"), filepath.Join(dir, "raw.pcap")
	errw := newLineWriter()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"record", "--iface", "lo", "--port", port, "--host", "127.0.0.1", "--pcap-out", pcap, "--max-duration", "2s", "-o", out},
			strings.NewReader(""), io.Discard, errw)
	}()
	waitMatch(t, errw.lines, `^Capturing on lo \(tcp and port \d+ and \(host 127\.0\.0\.1\)\)`, errw.String)
	req, _ := http.NewRequest("GET", api.URL+"/api/v1/namespaces/demo/configmaps?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+recKubeToken)
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if code := waitExit(t, done, errw); code != 0 {
		t.Fatalf("record --iface: exit %d:\n%s", code, errw.String())
	}
	got, idx := sessionFrames(t, out)
	checkEvents(t, got, evs)
	if idx.Meta.Source != "iface" || idx.Meta.CaptureFile != "raw.pcap" || idx.Summary == nil || idx.Summary.Packets == 0 {
		t.Errorf("meta %+v, summary %+v", idx.Meta, idx.Summary)
	}
	wttest.CheckNoSecrets(t, out, recKubeToken, recSecret)
	// The raw packets hold the same watch.
	again := filepath.Join(dir, "again.wt")
	if _, stderr, code := wtrace(t, "record", "--pcap", pcap, "-o", again); code != 0 {
		t.Fatalf("record --pcap %s: exit %d: %s", pcap, code, stderr)
	}
	got2, _ := sessionFrames(t, again)
	checkEvents(t, got2, evs)
}

// The signal tests run `wtrace record` in a child process: the test binary
// itself, re-executed into TestRecordChild.
const childEnv = "WTRACE_TEST_RECORD_CHILD"

func childArgs(args ...string) string {
	b, _ := json.Marshal(args)
	return string(b)
}

// TestRecordChild is not a test: it is the child process of the signal
// tests, running the command line in $WTRACE_TEST_RECORD_CHILD.
func TestRecordChild(t *testing.T) {
	v := os.Getenv(childEnv)
	if v == "" {
		t.Skip("helper process of the signal tests")
	}
	var args []string
	if err := json.Unmarshal([]byte(v), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}

type child struct {
	cmd  *exec.Cmd
	errw *lineWriter
	done chan struct{}
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{errw: newLineWriter(), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestRecordChild$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+childArgs(args...))
	c.cmd.Stderr = c.errw
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// wait waits for the child to exit and returns its exit status.
func (c *child) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		c.cmd.Process.Kill()
		t.Fatalf("the child did not exit within a minute:\n%s", c.errw.String())
	}
	return c.cmd.ProcessState.ExitCode()
}

func (c *child) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// waitFlushed waits until the session file at path shows n events.
func waitFlushed(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if countFrames(path) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not show %d events within a minute", path, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRecordProxySignals: the first SIGINT (or SIGTERM) finishes the file
// cleanly, the open watch ended cleanly between two events; after SIGKILL the file is
// readable up to its last flushed block, inspect says it was not closed
// cleanly, and verify --repair makes a clean copy; a second SIGINT aborts.
func TestRecordProxySignals(t *testing.T) {
	evs := recEvents(40, 300)
	api := newFakeAPIServer(t, evs, true)
	kc := writeKubeconfig(t, api.URL, api.Certificate())
	for _, sig := range []string{"SIGINT", "SIGTERM", "SIGKILL", "SIGINT×2"} {
		t.Run(sig, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "s.wt")
			c := startChild(t, "record", "--proxy", "--kubeconfig", kc, "--listen", "127.0.0.1:0", "-o", out)
			base := waitMatch(t, c.errw.lines, proxyBanner, c.errw.String)[1]
			watchDone := make(chan []string, 1)
			watchErr := make(chan error, 1)
			go func() {
				// The watch stays open (the fake apiserver hangs) until the
				// recording ends it.
				req, _ := http.NewRequest("GET", base+"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=9", nil)
				req.Header.Set("Authorization", "Bearer "+recClientToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					watchErr <- err
					watchDone <- nil
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				watchErr <- err
				watchDone <- strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			}()
			waitFlushed(t, out, len(evs))
			switch sig {
			case "SIGINT":
				c.signal(t, os.Interrupt)
			case "SIGTERM":
				c.signal(t, syscall.SIGTERM)
			case "SIGKILL":
				c.signal(t, os.Kill)
			case "SIGINT×2":
				c.signal(t, os.Interrupt)
				waitMatch(t, c.errw.lines, "^Stopping: finishing the session file", c.errw.String)
				c.signal(t, os.Interrupt)
			}
			code := c.wait(t)
			<-watchDone
			if err := <-watchErr; err != nil && (sig == "SIGINT" || sig == "SIGTERM") {
				t.Errorf("the client's watch ended with %v; want a clean end (the proxy drains its watches)", err)
			}
			got, idx := sessionFrames(t, out)
			checkEvents(t, got, evs)
			noSecrets(t, out)
			inspect, _, _ := wtrace(t, "inspect", out)
			switch sig {
			case "SIGINT", "SIGTERM":
				if code != 0 || idx.Summary == nil || idx.Summary.Note != "stopped by the user" {
					t.Fatalf("exit %d, summary %+v:\n%s", code, idx.Summary, c.errw.String())
				}
				if !strings.Contains(inspect, "closed cleanly") || strings.Contains(inspect, "NOT closed cleanly") {
					t.Errorf("inspect:\n%s", inspect)
				}
				if x := idx.Exchanges; len(x) != 1 || x[0].End == nil {
					t.Errorf("exchanges %+v; want the watch, ended", x)
				}
				return
			case "SIGINT×2":
				// The clean stop may finish before the second signal lands
				// (it takes milliseconds); then there is nothing to abort.
				if code == 0 && idx.Summary != nil && strings.Contains(c.errw.String(), "Recorded proxy") {
					t.Logf("the clean stop finished before the second Ctrl-C")
					return
				}
				if code != 1 || !strings.Contains(c.errw.String(), "Aborted") {
					t.Fatalf("exit %d:\n%s", code, c.errw.String())
				}
			case "SIGKILL":
				if code != -1 {
					t.Fatalf("exit %d after SIGKILL", code)
				}
			}
			if idx.Summary != nil && sig == "SIGKILL" {
				t.Errorf("a killed recording has a Summary: %+v", idx.Summary)
			}
			if sig == "SIGKILL" && !strings.Contains(inspect, "NOT closed cleanly") {
				t.Errorf("inspect of a killed recording:\n%s", inspect)
			}
			if _, _, code := wtrace(t, "verify", out); code != 1 && sig == "SIGKILL" {
				t.Errorf("verify of a killed recording: exit %d; want 1", code)
			}
			fixed := filepath.Join(dir, "fixed.wt")
			if stdout, stderr, code := wtrace(t, "verify", "--repair", fixed, out); !strings.Contains(stdout, "repaired") {
				t.Fatalf("verify --repair: exit %d\n%s%s", code, stdout, stderr)
			}
			got, idx = sessionFrames(t, fixed)
			checkEvents(t, got, evs)
			if inspect, _, _ := wtrace(t, "inspect", fixed); !strings.Contains(inspect, "closed cleanly") || strings.Contains(inspect, "NOT closed cleanly") || idx.Summary == nil {
				t.Errorf("inspect of the repaired file:\n%s", inspect)
			}
			if _, _, code := wtrace(t, "verify", fixed); code != 0 {
				t.Errorf("verify of the repaired file: exit %d", code)
			}
			noSecrets(t, fixed)
		})
	}
}

// TestRecordProxyRotate: --rotate with --max-size spreads a long watch
// over numbered files, each closed cleanly and usable on its own, which
// together hold every event once.
func TestRecordProxyRotate(t *testing.T) {
	evs := recEvents(1500, 500)
	api := newFakeAPIServer(t, evs, true)
	kc := writeKubeconfig(t, api.URL, api.Certificate())
	dir := t.TempDir()
	out := filepath.Join(dir, "s.wt")
	c := startChild(t, "record", "--proxy", "--kubeconfig", kc, "--listen", "127.0.0.1:0", "--max-size", "32KiB", "--rotate", "-o", out)
	base := waitMatch(t, c.errw.lines, proxyBanner, c.errw.String)[1]
	if got := watchThrough(t, base, len(evs)); len(got) != len(evs) {
		t.Fatalf("the client read %d events", len(got))
	}
	// Wait for the parts to hold every event, then stop.
	deadline := time.Now().Add(60 * time.Second)
	for {
		parts, _ := filepath.Glob(filepath.Join(dir, "s-*.wt"))
		n := 0
		for _, p := range parts {
			n += countFrames(p) // the newest part may not even have its header yet
		}
		if n >= len(evs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the parts %q hold %d events; want %d\n%s", parts, n, len(evs), c.errw.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.signal(t, os.Interrupt)
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, c.errw.String())
	}
	parts, _ := filepath.Glob(filepath.Join(dir, "s-*.wt"))
	if len(parts) < 3 {
		t.Fatalf("%d parts; want at least 3", len(parts))
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written; with --rotate only numbered parts are", out)
	}
	var all []string
	for i, p := range parts {
		if want := filepath.Join(dir, fmt.Sprintf("s-%04d.wt", i+1)); p != want {
			t.Errorf("part %d is %s; want %s", i+1, p, want)
		}
		got, idx := sessionFrames(t, p)
		if idx.Summary == nil || idx.Meta == nil || idx.Meta.Labels["part"] != fmt.Sprint(i+1) {
			t.Errorf("%s: meta %+v, summary %+v", p, idx.Meta, idx.Summary)
		}
		// Each part knows the watch: its request and response head.
		if len(idx.Exchanges) == 0 || idx.Exchanges[0].Response == nil || idx.Exchanges[0].Request.Missing {
			t.Errorf("%s does not announce the watch: %+v", p, idx.Exchanges)
		}
		stdout, stderr, code := wtrace(t, "events", p)
		if code != 0 || strings.Count(stdout, "\n") != len(got) {
			t.Errorf("events %s: exit %d, %d lines for %d frames; %s", p, code, strings.Count(stdout, "\n"), len(got), stderr)
		}
		all = append(all, got...)
		noSecrets(t, p)
		if i == 1 {
			// A middle part replays on its own: its events, as recorded
			// (the watch does not end in this part, so read only those).
			srv := replaytest.NewServer(t, p, replay.Options{Writes: replay.WritesReject})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/namespaces/demo/configmaps?watch=true&resourceVersion=9", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			// The newline after each event is the next event's Pre: the
			// part's body starts with the newline after the part before's
			// last event, and its last event has none yet.
			want := "\n" + strings.Join(got, "\n")
			b := make([]byte, len(want))
			if _, err := io.ReadFull(br, b); err != nil || string(b) != want {
				t.Errorf("replay of %s: %d bytes, %v; want its %d events", p, len(b), err, len(got))
			}
			cancel()
			resp.Body.Close()
		}
	}
	checkEvents(t, all, evs)
	if !strings.Contains(c.errw.String(), "Session files: "+parts[0]+" … "+parts[len(parts)-1]) {
		t.Errorf("summary paragraph:\n%s", c.errw.String())
	}
}
