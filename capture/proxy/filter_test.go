package proxy

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

// TestProxyFilter: the proxy serves only loopback hosts and refuses exec,
// attach and portforward (websocket upgrades to them too), as kubectl
// proxy does: a refused request gets 403 Forbidden and never reaches the
// apiserver with the kubeconfig's credentials — over HTTP/1.1 and
// HTTP/2 (the :authority). AcceptHosts and RejectPaths widen it.
func TestProxyFilter(t *testing.T) {
	up := newUpstream(t, testEvents(2))
	cl, err := LoadConfig(kubeconfig(t, up.URL, certPEM(up.Server), "current-context: ctx\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	type request struct {
		host, path string
		upgrade    bool
	}
	secrets := "/api/v1/namespaces/default/secrets"
	exec := "/api/v1/namespaces/default/pods/p/exec?command=id&stdout=true"
	for _, tc := range []struct {
		name   string
		opts   Options
		req    request
		served bool
	}{
		{"loopback", Options{}, request{host: "127.0.0.1:8001", path: secrets}, true},
		{"localhost", Options{}, request{host: "localhost", path: secrets}, true},
		{"ipv6 loopback", Options{}, request{host: "[::1]:8001", path: secrets}, true},
		{"rebinding", Options{}, request{host: "rebind.attacker.example", path: secrets}, false},
		{"rebinding with port", Options{}, request{host: "rebind.attacker.example:8001", path: secrets}, false},
		{"rebinding over tls", Options{TLS: true}, request{host: "rebind.attacker.example:8001", path: secrets}, false},
		{"exec", Options{}, request{host: "127.0.0.1", path: exec}, false},
		{"exec websocket", Options{}, request{host: "127.0.0.1", path: exec, upgrade: true}, false},
		{"exec websocket rebinding", Options{}, request{host: "rebind.attacker.example", path: exec, upgrade: true}, false},
		{"attach", Options{}, request{host: "localhost", path: "/api/v1/namespaces/d/pods/p/attach"}, false},
		{"portforward", Options{}, request{host: "localhost", path: "/api/v1/namespaces/d/pods/p/portforward"}, false},
		{"accept-hosts", Options{AcceptHosts: []string{`^wtrace\.test$`}}, request{host: "wtrace.test:8001", path: secrets}, true},
		{"accept-hosts narrows", Options{AcceptHosts: []string{`^wtrace\.test$`}}, request{host: "localhost", path: secrets}, false},
		{"reject-paths none", Options{RejectPaths: []string{}}, request{host: "localhost", path: exec}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Listen = "127.0.0.1:0"
			p, err := New(cl.Config, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			up.mu.Lock()
			before := len(up.auth)
			up.mu.Unlock()
			var status int
			var body string
			if tc.opts.TLS {
				tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
				defer tr.CloseIdleConnections()
				req, _ := http.NewRequest("GET", p.URL+tc.req.path, nil)
				req.Host = tc.req.host
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
				conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				upgrade := ""
				if tc.req.upgrade {
					upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n"
				}
				fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", tc.req.path, tc.req.host, upgrade)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 64)
				n, _ := io.ReadFull(resp.Body, b)
				status, body = resp.StatusCode, string(b[:n])
			}
			up.mu.Lock()
			reached := len(up.auth) > before
			up.mu.Unlock()
			if tc.served {
				if status == http.StatusForbidden || !reached {
					t.Errorf("%+v: %d %q, upstream reached %v; want it served", tc.req, status, body, reached)
				}
				return
			}
			if status != http.StatusForbidden || body != "Forbidden\n" || reached {
				t.Errorf("%+v: %d %q, upstream reached %v; want 403 Forbidden and the upstream untouched", tc.req, status, body, reached)
			}
		})
	}
}
