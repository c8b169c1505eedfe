package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// TestTransferCodingGzip: bodies whose transfer coding is "gzip, chunked"
// (RFC 9112 §7: a coding applied for the transfer, under the chunked
// framing) are read through it, like a content coding: a Secret in a
// response, in a request to a path that is not a Secret's, in a watch
// event. Issue 27: such bodies were stored gzip'd as they came, never
// judged. The session must hold no piece of the Secret's value, raw, in
// base64, or once its bodies are gunzipped; the watch's events are still
// split and recorded.
func TestTransferCodingGzip(t *testing.T) {
	const plant = "teGzipPlanted7a3c9e1d"
	secret := fmt.Sprintf(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db","namespace":"demo","resourceVersion":"7"},"data":{"password":%q}}`,
		base64.StdEncoding.EncodeToString([]byte(plant)))
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	chunked := func(p []byte) string { return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(p), p) }
	for _, tc := range []struct {
		name     string
		req      string
		resp     string
		watchEvs int
	}{
		{"response", "GET /api/v1/namespaces/demo/configmaps/db HTTP/1.1\r\nHost: k\r\n\r\n",
			"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(gz(secret)), 0},
		{"response, two fields", "GET /api/v1/namespaces/demo/configmaps/db HTTP/1.1\r\nHost: k\r\n\r\n",
			"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(gz(secret)), 0},
		{"response, untyped", "GET /api/v1/namespaces/demo/configmaps/db HTTP/1.1\r\nHost: k\r\n\r\n",
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(gz(secret)), 0},
		{"request, untyped", "POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: k\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(gz(secret)),
			"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 0},
		{"request", "POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(gz(secret)),
			"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 0},
		{"content and transfer coded", "GET /api/v1/namespaces/demo/secrets/db HTTP/1.1\r\nHost: k\r\n\r\n",
			"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(gz(string(gz(secret)))), 0},
		{"watch", "GET /api/v1/namespaces/demo/secrets?watch=true HTTP/1.1\r\nHost: k\r\n\r\n",
			"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(gz(`{"type":"ADDED","object":`+secret+"}\n")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := pcaptest.New()
			c := b.Conn("127.0.0.1:40000", "127.0.0.1:8001", true)
			c.Send(pcaptest.ToServer, []byte(tc.req))
			c.Send(pcaptest.ToClient, []byte(tc.resp))
			c.FIN(pcaptest.ToServer)
			c.FIN(pcaptest.ToClient)
			sink, _ := recordReader(t, bytes.NewReader(b.Pcap()), Options{})
			needles := [][]byte{[]byte(plant), []byte(base64.StdEncoding.EncodeToString([]byte(plant))[:16])}
			bodies := map[[2]int64][]byte{}
			frames := 0
			for _, r := range sink.recs {
				var data []byte
				switch r := r.(type) {
				case *formats.Body:
					data = r.Data
					k := [2]int64{r.Exchange, int64(r.Dir)}
					bodies[k] = append(bodies[k], r.Data...)
				case *formats.Frame:
					data = r.Data
					frames++
				case *formats.End:
					data = r.Tail
				}
				for _, n := range needles {
					if bytes.Contains(data, n) {
						t.Fatalf("%T holds the Secret's value: %q", r, data)
					}
				}
			}
			for k, body := range bodies {
				for range 2 { // undo up to two gzip layers
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						break
					}
					var out bytes.Buffer
					if _, err := out.ReadFrom(zr); err != nil {
						break
					}
					body = out.Bytes()
				}
				for _, n := range needles {
					if bytes.Contains(body, n) {
						t.Fatalf("exchange %d direction %d: the body, gunzipped, holds the Secret's value: %q", k[0], k[1], body)
					}
				}
			}
			if frames != tc.watchEvs {
				t.Errorf("%d watch events recorded; want %d", frames, tc.watchEvs)
			}
		})
	}
}
