package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

const gzSecret = "gz-late-secret-4f7a91c2"

// gzipList returns a gzip'd JSON v1 List of n ConfigMaps holding
// incompressible data (about 1 KiB each), with, if secret, a Secret last.
func gzipList(n int, secret bool) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteString(`{"kind":"List","apiVersion":"v1","metadata":{},"items":[`)
	noise := make([]byte, 768)
	for i := range n {
		for j := range noise {
			noise[j] = byte(rng.Uint32())
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d"},"data":{"v":"%s"}}`, i, base64.StdEncoding.EncodeToString(noise))
	}
	if secret {
		fmt.Fprintf(&b, `,{"kind":"Secret","apiVersion":"v1","metadata":{"name":"late"},"data":{"k":"%s"}}`, base64.StdEncoding.EncodeToString([]byte(gzSecret)))
	}
	b.WriteString("]}")
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(b.String()))
	zw.Close()
	return z.Bytes()
}

// chunkedResponse frames body in chunks of 32 KiB.
func chunkedResponse(body []byte) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
	for p := body; len(p) > 0; {
		n := min(len(p), 32<<10)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, p[:n])
		p = p[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

func storedBody(recs []formats.Record) ([]byte, int, *formats.End) {
	var body []byte
	chunks := 0
	var end *formats.End
	for _, r := range recs {
		switch r := r.(type) {
		case *formats.Body:
			if r.Dir == formats.ServerToClient {
				if int(r.Offset) != len(body) {
					panic(fmt.Sprintf("body piece at %d after %d bytes", r.Offset, len(body)))
				}
				body = append(body, r.Data...)
			}
		case *formats.Chunk:
			chunks++
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				end = r
			}
		}
	}
	return body, chunks, end
}

// TestGzipBodies: a gzip'd body is stored as sent when nothing in it is a
// credential, re-encoded when something is, and — past maxHeldEncoded
// compressed bytes stored as sent — cut (the rest replaced) when a
// credential comes that late. Memory is bounded either way.
func TestGzipBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		secret bool
	}{
		{"small-clean", 100, false},
		{"small-secret", 100, true},
		{"large-clean", 7000, false},
		{"large-late-secret", 7000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gz := gzipList(tc.n, tc.secret)
			large := len(gz) > maxHeldEncoded
			if large != (tc.n > 1000) {
				t.Fatalf("a list of %d items is %d bytes gzip'd; the test wants it on the other side of %d", tc.n, len(gz), maxHeldEncoded)
			}
			recs := runH1([]step{toServer("GET /api/v1/configmaps HTTP/1.1\r\nHost: x\r\n\r\n"), toClient(chunkedResponse(gz))}, 1460, formats.EndTruncated)
			body, chunks, end := storedBody(recs)
			if end == nil || end.Status != formats.EndComplete {
				t.Fatalf("end = %+v", end)
			}
			switch {
			case !tc.secret:
				if !bytes.Equal(body, gz) || chunks == 0 {
					t.Errorf("stored %d bytes (equal %v) and %d chunk records; want the body as sent, with its chunks", len(body), bytes.Equal(body, gz), chunks)
				}
				if len(end.Redactions) != 0 {
					t.Errorf("redactions %+v; want none", end.Redactions)
				}
			case !large:
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				dec, err := io.ReadAll(zr)
				if err != nil {
					t.Fatalf("re-encoded body does not decode: %v", err)
				}
				if bytes.Contains(dec, []byte(base64.StdEncoding.EncodeToString([]byte(gzSecret)))) || !strings.Contains(end.Note, "re-encoded") || chunks != 0 {
					t.Errorf("re-encoded body: secret present %v, note %q, %d chunks", bytes.Contains(dec, []byte(gzSecret)), end.Note, chunks)
				}
			default:
				if len(body) != len(gz) || !bytes.Equal(body[:maxHeldEncoded], gz[:maxHeldEncoded]) {
					t.Errorf("stored %d bytes; want %d, the first %d as sent", len(body), len(gz), maxHeldEncoded)
				}
				zr, _ := gzip.NewReader(bytes.NewReader(body))
				dec, _ := io.ReadAll(zr) // cut where the filler begins
				if bytes.Contains(dec, []byte(base64.StdEncoding.EncodeToString([]byte(gzSecret)))) {
					t.Error("the late secret survived")
				}
				unparsed := false
				for _, r := range end.Redactions {
					unparsed = unparsed || r.Reason == formats.RedactUnparsed
				}
				if !unparsed {
					t.Errorf("redactions %+v; want the cut reported", end.Redactions)
				}
			}
		})
	}
}
