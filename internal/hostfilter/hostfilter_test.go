package hostfilter

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/testkit/k8stest"
)

// A request as a client sends it, and what the default filter does with
// it; kubectl is what kubectl proxy v1.33 does (checked against the real
// binary by TestKubectlProxyReference) where it differs.
type filterCase struct {
	host, path string
	served     bool
	kubectl    string // "" as served; "refused", "served", "redirected"
}

var filterCases = []filterCase{
	{host: "localhost", path: "/api/v1/namespaces/default/secrets", served: true},
	{host: "localhost:8001", path: "/api/v1/namespaces/default/secrets", served: true},
	{host: "127.0.0.1", path: "/api/v1/namespaces/default/secrets", served: true},
	{host: "127.0.0.1:9", path: "/api/v1/namespaces/default/secrets", served: true},
	{host: "[::1]", path: "/api/v1/namespaces/default/secrets", served: true},
	// kubectl proxy strips the port, then "^\[::1\]$" misses "::1".
	{host: "[::1]:8001", path: "/api/v1/namespaces/default/secrets", served: true, kubectl: "refused"},
	{host: "rebind.attacker.example", path: "/api/v1/namespaces/default/secrets"},
	{host: "rebind.attacker.example:8001", path: "/api/v1/namespaces/default/secrets"},
	{host: "evil.localhost", path: "/api"},
	{host: "localhost.evil.example", path: "/api"},
	{host: "LOCALHOST", path: "/api"},
	{host: "localhost.", path: "/api"},
	{host: "127.0.0.2", path: "/api"},
	{host: "0.0.0.0", path: "/api"},
	{host: "", path: "/api"},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/exec"},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/exec?command=ls&stdout=true"},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/exec/"},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/%65xec"},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/attach"},
	// kubectl proxy does not refuse port-forwarding; the issue asks it.
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/portforward", kubectl: "served"},
	// kubectl proxy's ServeMux redirects to the clean path (which it
	// refuses); the recording proxy forwards paths as they are.
	{host: "localhost", path: "//api/v1/namespaces/d/pods/x/exec", kubectl: "redirected"},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/log", served: true},
	{host: "localhost", path: "/api/v1/namespaces/d/pods/x/exec-logs", served: false},
}

func (c filterCase) raw() string {
	return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", c.path, c.host)
}

func (c filterCase) String() string { return fmt.Sprintf("Host %q GET %s", c.host, c.path) }

// TestFilter: the default filter serves loopback hosts with any port and
// refuses every other host, and exec, attach and portforward.
func TestFilter(t *testing.T) {
	f, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range filterCases {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(c.raw())))
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if err := f.Check(r); (err == nil) != c.served {
			t.Errorf("Check(%v) = %v; want served %v", c, err, c.served)
		}
	}
}

// TestFilterOptions: --accept-hosts widens the hosts, --reject-paths ”
// refuses no path, a bad expression is an error.
func TestFilterOptions(t *testing.T) {
	req := func(host, path string) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = host
		return r
	}
	for _, tc := range []struct {
		hosts, paths string
		r            *http.Request
		served       bool
	}{
		{`^replay\.demo\.svc$`, DefaultRejectPaths, req("replay.demo.svc:8080", "/api"), true},
		{`^replay\.demo\.svc$`, DefaultRejectPaths, req("localhost", "/api"), false},
		{`.*`, DefaultRejectPaths, req("anything.example", "/api"), true},
		{DefaultAcceptHosts, "", req("localhost", "/api/v1/namespaces/d/pods/x/exec"), true},
		{DefaultAcceptHosts, `^/apis/`, req("localhost", "/apis/apps/v1"), false},
		{"", DefaultRejectPaths, req("localhost", "/api"), false},
	} {
		f, err := New(Split(tc.hosts), Split(tc.paths))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(tc.r); (err == nil) != tc.served {
			t.Errorf("accept-hosts %q reject-paths %q: Check(Host %q GET %s) = %v; want served %v", tc.hosts, tc.paths, tc.r.Host, tc.r.URL.Path, err, tc.served)
		}
	}
	if _, err := New([]string{"("}, nil); err == nil || !strings.Contains(err.Error(), "accept-hosts") {
		t.Errorf("New(bad expression) = %v; want an error naming accept-hosts", err)
	}
}

// TestWrap: a refused request gets 403 Forbidden as from kubectl proxy,
// and never reaches the handler.
func TestWrap(t *testing.T) {
	f, _ := New(nil, nil)
	reached := false
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }), nil)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/v1/secrets", nil)
	r.Host = "rebind.attacker.example"
	h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || w.Body.String() != "Forbidden\n" || reached {
		t.Errorf("refused request: %d %q, handler reached %v; want 403 \"Forbidden\\n\", not reached", w.Code, w.Body, reached)
	}
}

// TestKubectlProxyReference runs the real kubectl proxy (v1.33, skipped
// without the binary) with its default filter in front of a stand-in
// apiserver, and checks that it does with each request of the table what
// the table says it does: the reference the filter follows.
func TestKubectlProxyReference(t *testing.T) {
	kubectl := k8stest.Kubectl(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream") }))
	defer up.Close()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: up\n  cluster:\n    server: " + up.URL +
		"\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context: {cluster: up, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectl, "--kubeconfig", kc, "proxy", "--port=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		re := regexp.MustCompile(`Starting to serve on (\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(time.Minute):
		t.Fatal("kubectl proxy did not start within a minute")
	}
	for _, c := range filterCases {
		conn, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, c.raw())
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		got := "served"
		switch {
		case resp.StatusCode == http.StatusForbidden && string(body) == "Forbidden\n":
			got = "refused"
		case resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusMovedPermanently:
			got = "redirected"
		case string(body) != "upstream":
			t.Fatalf("%v: kubectl proxy answered %d %q", c, resp.StatusCode, body)
		}
		want := c.kubectl
		if want == "" {
			want = map[bool]string{true: "served", false: "refused"}[c.served]
		}
		if got != want {
			t.Errorf("kubectl proxy %v: %s; the table says %s", c, got, want)
		}
	}
}

// FuzzCheck: whatever the Host and path, the default filter never panics,
// serves only the loopback hosts, and refuses a path of exec, attach or
// portforward whatever its Host.
func FuzzCheck(f *testing.F) {
	for _, c := range filterCases {
		f.Add(c.host, c.path)
	}
	filt, err := New(nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	rejects := regexp.MustCompile(`^/api/.*/pods/.*/(exec|attach|portforward)`)
	f.Fuzz(func(t *testing.T, host, p string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host, r.URL.Path = host, p
		err := filt.Check(r)
		if err != nil {
			return
		}
		if h := Host(host); h != "localhost" && h != "127.0.0.1" && h != "[::1]" {
			t.Fatalf("Check(Host %q) served; its host %q is not loopback", host, h)
		}
		if rejects.MatchString(p) {
			t.Fatalf("Check(path %q) served", p)
		}
	})
}
