package replay

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// reframed builds a capture of the basic-json watch (its recorded request
// target, events, chunk boundaries and times, from the real capture) whose
// server framed every chunk with extensions and ended the body with a
// last-chunk extension and two trailer fields, as an HTTP/1.1 server may.
// It returns the capture's path and the response body as sent on the wire
// (chunked framing included).
func reframed(t *testing.T) (pcap string, wire []byte, target string, trailer []formats.Header, lastExt string, exts []string) {
	t.Helper()
	f := openSession(t, corpusSession(t, "basic-json"))
	id := exchangeByTarget(t, f, "GET", "watch=true")
	info := f.Index().Exchanges[id]
	var body []byte
	for rec, err := range f.ExchangeRecords(id).All() {
		if err != nil {
			t.Fatal(err)
		}
		switch r := rec.(type) {
		case *formats.Frame:
			body = append(append(body, r.Pre...), r.Data...)
		case *formats.End:
			if r.Dir == formats.ServerToClient {
				body = append(body, r.Tail...)
			}
		}
	}
	chunks := sessionChunks(t, f, id)
	if len(chunks) < 10 || info.End == nil || info.End.Status != formats.EndComplete {
		t.Fatalf("the basic-json watch: %d chunks, end %+v", len(chunks), info.End)
	}
	target = info.Request.Target
	trailer = []formats.Header{{Name: "X-Watch-End", Value: "timeout"}, {Name: "X-Events", Value: fmt.Sprint(len(sessionEvents(t, f, id)))}}
	lastExt = `events=200;note="end of watch"`

	b := pcaptest.New()
	b.SetNow(time.Unix(0, info.Request.Time))
	c := b.Conn("127.0.0.1:41000", "127.0.0.1:8001", true)
	c.Send(pcaptest.ToServer, []byte("GET "+target+" HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nAccept: application/json\r\nTE: trailers\r\n\r\n"))
	b.SetNow(time.Unix(0, info.Response.Time))
	c.Send(pcaptest.ToClient, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTrailer: X-Watch-End, X-Events\r\nTransfer-Encoding: chunked\r\n\r\n"))
	for i, ch := range chunks {
		ext := fmt.Sprintf("seq=%d;src=basic-json", i)
		if i%3 == 1 {
			ext = "seq=" + fmt.Sprint(i) // one without the second
		}
		exts = append(exts, ext)
		p := fmt.Appendf(nil, "%x;%s\r\n", ch.Size, ext)
		p = append(append(p, body[ch.Offset:ch.Offset+ch.Size]...), "\r\n"...)
		wire = append(wire, p...)
		b.SetNow(time.Unix(0, ch.Time))
		c.Send(pcaptest.ToClient, p)
	}
	end := []byte("0;" + lastExt + "\r\n")
	for _, h := range trailer {
		end = append(end, h.Name+": "+h.Value+"\r\n"...)
	}
	end = append(end, "\r\n"...)
	wire = append(wire, end...)
	b.SetNow(time.Unix(0, info.End.Time))
	c.Send(pcaptest.ToClient, end)
	c.FIN(pcaptest.ToServer)
	c.FIN(pcaptest.ToClient)
	pcap = filepath.Join(t.TempDir(), "reframed.pcap")
	if err := os.WriteFile(pcap, b.Pcap(), 0o644); err != nil {
		t.Fatal(err)
	}
	return pcap, wire, target, trailer, lastExt, exts
}

// TestChunkExtensionsTrailers: the basic-json watch as a server that uses
// chunk extensions and trailers would have sent it (reframed). The
// session keeps every chunk's extensions, the last-chunk's and the
// trailer fields; a replay over HTTP/1.1 sends the body framed exactly as
// recorded, byte for byte (with the world and without it), and over
// HTTP/2 the trailer fields as trailing HEADERS.
func TestChunkExtensionsTrailers(t *testing.T) {
	pcap, wire, target, trailer, lastExt, exts := reframed(t)
	path := filepath.Join(t.TempDir(), "reframed.wt")
	if err := recordPcap(pcap, path); err != nil {
		t.Fatal(err)
	}
	f := openSession(t, path)
	id := exchangeByTarget(t, f, "GET", "watch=true")
	var got []string
	for _, c := range sessionChunks(t, f, id) {
		got = append(got, c.Ext)
	}
	if !slices.Equal(got, exts) {
		t.Fatalf("recorded chunk extensions %q; want %q", got, exts)
	}
	e := f.Index().Exchanges[id].End
	if e.LastExt != lastExt || !slices.Equal(e.Trailer, trailer) {
		t.Fatalf("recorded end: last-chunk %q, trailer %+v; want %q, %+v", e.LastExt, e.Trailer, lastExt, trailer)
	}

	for _, writes := range []Writes{WritesReject, WritesRecorded} {
		t.Run(fmt.Sprintf("HTTP/1.1/%v", writes), func(t *testing.T) {
			srv := newTestServer(t, path, Options{Speed: 0, Writes: writes})
			r := rawGet(t, srv.URL, target)
			if !r.chunked {
				t.Fatalf("response head %v; want chunked", r.header)
			}
			b, err := io.ReadAll(r.br)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, wire) {
				i := 0
				for i < len(b) && i < len(wire) && b[i] == wire[i] {
					i++
				}
				t.Fatalf("the body on the wire differs from the recorded one at byte %d of %d:\n got %q\nwant %q",
					i, len(wire), b[max(0, i-40):min(len(b), i+80)], wire[max(0, i-40):min(len(wire), i+80)])
			}
		})
	}

	t.Run("HTTP/2", func(t *testing.T) {
		srv, err := Open(path, Options{Writes: WritesReject, Speed: 0})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		if err := srv.StartTLS(); err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(srv.CertPEM())
		c := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+target, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s; want HTTP/2", resp.Proto)
		}
		for _, h := range trailer {
			if v := resp.Trailer.Get(h.Name); v != h.Value {
				t.Errorf("trailer %s = %q; want %q (all: %v)", h.Name, v, h.Value, resp.Trailer)
			}
		}
		if !strings.Contains(fmt.Sprint(resp.Trailer), "X-Events") {
			t.Errorf("trailers %v", resp.Trailer)
		}
	})
}
