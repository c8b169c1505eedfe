package replay

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestReplayGuard: the replay serves only loopback hosts (a DNS rebinding
// page gets 403 Forbidden, not the session's objects) and refuses exec,
// attach and portforward, over HTTP/1.1 and HTTP/2, as the recording proxy
// and kubectl proxy do; Options.AcceptHosts and RejectPaths widen it.
func TestReplayGuard(t *testing.T) {
	path := corpusSession(t, "basic-json")
	list := "/api/v1/namespaces/corpus-basic/configmaps"
	exec := "/api/v1/namespaces/corpus-basic/pods/p/exec?command=id"
	for _, tc := range []struct {
		name       string
		opts       Options
		tls        bool
		host, path string
		served     bool
	}{
		{"loopback", Options{}, false, "127.0.0.1:8080", list, true},
		{"localhost", Options{}, false, "localhost", list, true},
		{"ipv6 loopback", Options{}, false, "[::1]:8080", list, true},
		{"rebinding", Options{}, false, "rebind.attacker.example:8080", list, false},
		{"rebinding over h2", Options{}, true, "rebind.attacker.example", list, false},
		{"exec", Options{}, false, "127.0.0.1", exec, false},
		{"portforward", Options{}, false, "127.0.0.1", "/api/v1/namespaces/corpus-basic/pods/p/portforward", false},
		{"accept-hosts", Options{AcceptHosts: []string{`^replay\.demo\.svc$`}}, false, "replay.demo.svc:8080", list, true},
		{"reject-paths none", Options{RejectPaths: []string{}}, false, "127.0.0.1", exec, true},
		// A probe names the pod by its address: the Server's own
		// endpoints are served whatever the Host; nothing else is.
		{"probe", Options{}, false, "10.1.2.3:8080", "/livez", true},
		{"readyz", Options{}, false, "10.1.2.3:8080", "/readyz", true},
		{"not a probe", Options{}, false, "10.1.2.3:8080", list, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Open(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if tc.tls {
				err = srv.StartTLS()
			} else {
				err = srv.Start()
			}
			if err != nil {
				t.Fatal(err)
			}
			var status int
			var body string
			if tc.tls {
				tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
				defer tr.CloseIdleConnections()
				req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
				req.Host = tc.host
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != 2 {
					t.Fatalf("the client spoke %s; want HTTP/2", resp.Proto)
				}
				status, body = resp.StatusCode, string(b)
			} else {
				conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tc.path, tc.host)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				status, body = resp.StatusCode, string(b)
			}
			switch {
			case tc.served && status == http.StatusForbidden:
				t.Errorf("Host %q GET %s: %d %q; want it served", tc.host, tc.path, status, body)
			case !tc.served && (status != http.StatusForbidden || body != "Forbidden\n"):
				t.Errorf("Host %q GET %s: %d %.80q; want 403 Forbidden", tc.host, tc.path, status, body)
			}
		})
	}
}
