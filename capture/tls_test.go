package capture

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtrace/wtrace/capture/tlsdec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/pcaptest"
)

// wireLog records what a client's connection wrote and read, in order.
type wireLog struct {
	mu     sync.Mutex
	pieces []wirePiece
}

type loggedConn struct {
	net.Conn
	log *wireLog
}

func (c *loggedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.log.add(formats.ServerToClient, p[:n])
	}
	return n, err
}

func (c *loggedConn) Write(p []byte) (int, error) {
	c.log.add(formats.ClientToServer, p)
	return c.Conn.Write(p)
}

func (l *wireLog) add(dir formats.Direction, p []byte) {
	l.mu.Lock()
	l.pieces = append(l.pieces, wirePiece{dir: dir, data: bytes.Clone(p)})
	l.mu.Unlock()
}

// tlsWatch runs a JSON watch over real TLS (crypto/tls on loopback) with
// the given version, and returns the bytes the client saw, its key log and
// the events the server sent.
func tlsWatch(t *testing.T, maxVersion uint16) (*wireLog, string, []string) {
	_, _, events := watchBody(8)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for _, ev := range events {
			fmt.Fprintf(w, "%s\n", ev)
			w.(http.Flusher).Flush()
		}
	}))
	srv.StartTLS()
	defer srv.Close()

	var keys bytes.Buffer
	log := &wireLog{}
	raw, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.MaxVersion = maxVersion
	cfg.KeyLogWriter = &keys
	cfg.NextProtos = []string{"http/1.1"}
	cfg.ServerName = "example.com"
	conn := tls.Client(&loggedConn{Conn: raw, log: log}, cfg)
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/v1/namespaces/demo/configmaps?watch=true HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer s3cr3t-token\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if v := conn.ConnectionState().Version; v != maxVersion {
		t.Fatalf("negotiated version %x; want %x", v, maxVersion)
	}
	return log, keys.String(), events
}

// piecesPcap writes pieces as the packets of one TCP connection: the
// handshake, each piece in segments of at most mss bytes stamped with the
// piece's time (if set), then both FINs.
func piecesPcap(pieces []wirePiece, mss int, client, server string) []byte {
	b := pcaptest.New()
	if len(pieces) > 0 && pieces[0].t != 0 {
		b.SetNow(time.Unix(0, pieces[0].t-3000))
	}
	c := b.Conn(client, server, true)
	c.MSS = mss
	for _, p := range pieces {
		dir := pcaptest.ToServer
		if p.dir == formats.ServerToClient {
			dir = pcaptest.ToClient
		}
		for _, seg := range c.Segments(dir, p.data) {
			if p.t != 0 {
				b.SetNow(time.Unix(0, p.t))
			}
			c.Add(seg)
		}
	}
	c.FIN(pcaptest.ToServer)
	c.FIN(pcaptest.ToClient)
	c.Ack(pcaptest.ToServer)
	return b.Pcap()
}

// TestTLSRecord: TLS 1.2 and 1.3 connections made in the test, captured as
// a pcap, recorded with and without their key log.
func TestTLSRecord(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(fmt.Sprintf("%x", v), func(t *testing.T) {
			log, keylog, events := tlsWatch(t, v)
			pcap := piecesPcap(log.pieces, 1448, "127.0.0.1:41000", "127.0.0.1:6443")
			keys, err := tlsdec.ParseKeyLog(strings.NewReader(keylog))
			if err != nil {
				t.Fatal(err)
			}
			sink := recordPcap(t, pcap, Options{KeyLog: keys})
			if got := frames(sink.recs); strings.Join(got, "\n") != strings.Join(events, "\n") {
				t.Errorf("decrypted events: got %d, want %d", len(got), len(events))
			}
			var info *formats.TLS
			for _, r := range sink.recs {
				switch x := r.(type) {
				case *formats.TLS:
					info = x
				case *formats.Request:
					for _, h := range x.Header {
						if h.Name == "Authorization" && (!h.Redacted || h.Value != "") {
							t.Errorf("Authorization stored: %+v", h)
						}
					}
				}
			}
			if info == nil || info.Version != v || !info.Decrypted || info.ALPN != "http/1.1" || info.SNI != "example.com" {
				t.Errorf("TLS record = %+v", info)
			}

			// Without the key log: reported, nothing invented.
			sink = recordPcap(t, pcap, Options{})
			if got := frames(sink.recs); len(got) != 0 {
				t.Errorf("%d events without keys", len(got))
			}
			var noKeys bool
			for _, r := range sink.recs {
				switch x := r.(type) {
				case *formats.Anomaly:
					noKeys = noKeys || x.Kind == formats.AnomalyNoKeys
				case *formats.Request, *formats.Body:
					t.Errorf("%T recorded without keys", r)
				}
			}
			if !noKeys {
				t.Errorf("no no-keys anomaly recorded")
			}
		})
	}
}
