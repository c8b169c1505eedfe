package replay

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// TestTLS: StartTLS serves HTTP/2 and HTTP/1.1 (ALPN) with its generated
// certificate; watch streams keep their bytes and their endings over both
// (HTTP/2 turns FIN and RST into RST_STREAM).
func TestTLS(t *testing.T) {
	ev := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"a","resourceVersion":"%d"}}}`, i, 100+i))
	}
	w := func(ns string, end formats.EndStatus) synthExchange {
		return synthExchange{target: "/api/v1/namespaces/" + ns + "/configmaps?watch=true&resourceVersion=100", header: jsonHeader(),
			events: frame.JSON, frames: [][]byte{ev(1), ev(2)}, chunked: true, end: end, tail: []byte("\n")}
	}
	path := writeSession(t, w("clean", formats.EndComplete), w("fin", formats.EndClosed), w("rst", formats.EndReset))
	want := string(ev(1)) + "\n" + string(ev(2)) + "\n"
	srv, err := Open(path, Options{Writes: WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.StartTLS(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL, "https://") || srv.CertPEM() == nil {
		t.Fatalf("URL %q, certificate %d bytes", srv.URL, len(srv.CertPEM()))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CertPEM())
	h1 := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{}, // no HTTP/2
	}}
	for _, c := range []struct {
		name   string
		client *http.Client
		proto  string
	}{{"h2", srv.Client(), "HTTP/2.0"}, {"http1.1", h1, "HTTP/1.1"}} {
		for _, ns := range []string{"clean", "fin", "rst"} {
			t.Run(c.name+"/"+ns, func(t *testing.T) {
				resp, err := c.client.Get(srv.URL + "/api/v1/namespaces/" + ns + "/configmaps?watch=true&resourceVersion=100")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.Proto != c.proto {
					t.Errorf("protocol %s; want %s", resp.Proto, c.proto)
				}
				b, err := io.ReadAll(resp.Body)
				if ns == "clean" {
					if err != nil || string(b) != want {
						t.Errorf("body %q, %v; want %q, nil", b, err, want)
					}
					return
				}
				if err == nil {
					t.Errorf("stream recorded as %s ended cleanly", ns)
				}
				if !bytes.HasPrefix([]byte(want), b) {
					t.Errorf("body %q is not a prefix of %q", b, want)
				}
			})
		}
	}
}
