package tlsdec

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
	_ "unsafe" // go:linkname, to force a TLS 1.3 cipher suite
)

// Go's crypto/tls picks the TLS 1.3 suite itself (AES-128-GCM when the CPU
// has AES instructions); these lists are the only way to make it use
// another, both as client (offered) and server (preferred). They are marked
// for linkname access in crypto/tls/defaults.go.
//
//go:linkname defaultCipherSuitesTLS13 crypto/tls.defaultCipherSuitesTLS13
var defaultCipherSuitesTLS13 []uint16

//go:linkname defaultCipherSuitesTLS13NoAES crypto/tls.defaultCipherSuitesTLS13NoAES
var defaultCipherSuitesTLS13NoAES []uint16

// chunk is one Write on the wire of a recorded connection.
type chunk struct {
	dir  Direction
	data []byte
	t    int64 // order of the write, a stand-in for capture time
}

// session is a recorded TLS connection: what went over TCP, what the
// applications wrote into TLS, and the key log.
type session struct {
	keylog []byte
	chunks []chunk
	plain  [2][]byte
	state  tls.ConnectionState // the client's
}

func (s *session) wire(d Direction) []byte {
	var b []byte
	for _, c := range s.chunks {
		if c.dir == d {
			b = append(b, c.data...)
		}
	}
	return b
}

type recorder struct {
	mu     sync.Mutex
	n      int64
	chunks []chunk
}

func (r *recorder) add(d Direction, p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.chunks = append(r.chunks, chunk{dir: d, data: bytes.Clone(p), t: r.n})
}

type recConn struct {
	net.Conn
	dir Direction
	rec *recorder
}

func (c *recConn) Write(p []byte) (int, error) {
	c.rec.add(c.dir, p) // before sending: the peer cannot answer it earlier
	return c.Conn.Write(p)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

var (
	certOnce          sync.Once
	ecdsaCert, rsaCrt tls.Certificate
	certPool          *x509.CertPool
)

func testCerts(t testing.TB) {
	certOnce.Do(func() {
		certPool = x509.NewCertPool()
		mk := func(key any, pub any) tls.Certificate {
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(1),
				Subject:      pkix.Name{CommonName: "kube.test"},
				DNSNames:     []string{"kube.test"},
				NotBefore:    time.Now().Add(-time.Hour),
				NotAfter:     time.Now().Add(time.Hour),
				KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
				ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
				IsCA:         true, BasicConstraintsValid: true,
			}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
			if err != nil {
				panic(err)
			}
			c, _ := x509.ParseCertificate(der)
			certPool.AddCert(c)
			return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		}
		ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ecdsaCert = mk(ek, &ek.PublicKey)
		rk, _ := rsa.GenerateKey(rand.Reader, 2048)
		rsaCrt = mk(rk, &rk.PublicKey)
	})
}

type sessionConfig struct {
	maxVersion   uint16
	suites12     []uint16 // TLS 1.2 CipherSuites
	suite13      uint16   // forced TLS 1.3 suite; 0: Go's choice
	rsa          bool     // RSA server certificate instead of ECDSA
	clientALPN   []string
	serverALPN   []string
	curves       []tls.CurveID // server CurvePreferences (P-256 only forces a HelloRetryRequest)
	clientCert   bool
	cache        tls.ClientSessionCache // with a cache, the server's ticket key is fixed, so sessions resume
	uploadSize   int                    // bytes of the large request chunk
	downloadSize int                    // bytes of the large response chunk
}

// runSession makes one TLS connection over loopback TCP and runs an
// HTTP/1.1 exchange with chunked bodies both ways.
func runSession(t testing.TB, cfg sessionConfig) *session {
	t.Helper()
	testCerts(t)
	if cfg.suite13 != 0 {
		old, oldNoAES := defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES
		defaultCipherSuitesTLS13 = []uint16{cfg.suite13}
		defaultCipherSuitesTLS13NoAES = []uint16{cfg.suite13}
		defer func() { defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES = old, oldNoAES }()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rec := &recorder{}
	var keylog syncBuffer
	cert := ecdsaCert
	if cfg.rsa {
		cert = rsaCrt
	}
	srvCfg := &tls.Config{
		Certificates:     []tls.Certificate{cert},
		MaxVersion:       cfg.maxVersion,
		CipherSuites:     cfg.suites12,
		NextProtos:       cfg.serverALPN,
		CurvePreferences: cfg.curves,
	}
	if cfg.cache != nil {
		srvCfg.SetSessionTicketKeys([][32]byte{{1, 2, 3}})
	}
	if cfg.clientCert {
		srvCfg.ClientAuth = tls.RequireAndVerifyClientCert
		srvCfg.ClientCAs = certPool
	}
	cliCfg := &tls.Config{
		ServerName:         "kube.test",
		RootCAs:            certPool,
		MaxVersion:         cfg.maxVersion,
		CipherSuites:       cfg.suites12,
		NextProtos:         cfg.clientALPN,
		KeyLogWriter:       &keylog,
		ClientSessionCache: cfg.cache,
	}
	if cfg.clientCert {
		cliCfg.Certificates = []tls.Certificate{cert}
	}

	reqBody := pattern(cfg.uploadSize, 1)
	respBody := pattern(cfg.downloadSize, 2)
	var request, response [][]byte
	request = append(request, []byte("POST /api/v1/namespaces/demo/configmaps HTTP/1.1\r\nHost: kube.test\r\nTransfer-Encoding: chunked\r\n\r\n"),
		[]byte("5\r\nhello\r\n"), fmt.Appendf(nil, "%x\r\n", len(reqBody)), reqBody, []byte("\r\n0\r\n\r\n"))
	response = append(response, []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
		[]byte("6\r\nworld!\r\n"), fmt.Appendf(nil, "%x\r\n", len(respBody)), respBody, []byte("\r\n0\r\n\r\n"))
	s := &session{plain: [2][]byte{bytes.Join(request, nil), bytes.Join(response, nil)}}

	srvErr := make(chan error, 1)
	go func() {
		srvErr <- func() error {
			raw, err := ln.Accept()
			if err != nil {
				return err
			}
			sc := tls.Server(&recConn{Conn: raw, dir: ServerToClient, rec: rec}, srvCfg)
			defer sc.Close()
			got := make([]byte, len(s.plain[ClientToServer]))
			if _, err := io.ReadFull(sc, got); err != nil {
				return fmt.Errorf("server read: %v", err)
			}
			if !bytes.Equal(got, s.plain[ClientToServer]) {
				return fmt.Errorf("server read wrong request")
			}
			for _, p := range response {
				if _, err := sc.Write(p); err != nil {
					return err
				}
			}
			// Wait for the client's close_notify, then send ours.
			if _, err := sc.Read(make([]byte, 1)); err != io.EOF {
				return fmt.Errorf("server: want EOF, got %v", err)
			}
			return sc.Close()
		}()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := tls.Client(&recConn{Conn: raw, dir: ClientToServer, rec: rec}, cliCfg)
	for _, p := range request {
		if _, err := cc.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, len(s.plain[ServerToClient]))
	if _, err := io.ReadFull(cc, got); err != nil {
		t.Fatalf("client read: %v", err)
	}
	closeSession(t, s, cc, srvErr, &keylog, rec)
	return s
}

// closeSession ends a client connection of a test session with
// close_notify both ways (ours, then the server's answer), waits for the
// server, and fills in the session's state, key log and wire chunks.
func closeSession(t testing.TB, s *session, cc *tls.Conn, srvErr <-chan error, keylog *syncBuffer, rec *recorder) {
	t.Helper()
	s.state = cc.ConnectionState()
	if err := cc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(cc); err != nil || len(rest) > 0 {
		t.Fatalf("client: after close_notify read %d bytes, %v; want EOF", len(rest), err)
	}
	cc.Close()
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
	s.keylog = keylog.b.Bytes()
	rec.mu.Lock()
	s.chunks = rec.chunks
	rec.mu.Unlock()
}

// pattern returns n bytes that differ per offset and per seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) * 2654435761
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestGoServerKeyUpdate checks KeyUpdate against crypto/tls, which never
// starts one but answers one: the test injects a KeyUpdate
// (update_requested) sealed under the client's current keys into the
// client's byte stream, then a request under the next client keys. The Go
// server accepting both proves the test's key derivation; its answering
// KeyUpdate and the response under its next keys are what is decrypted.
func TestGoServerKeyUpdate(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		t.Run(suiteName(suite), func(t *testing.T) {
			s := runKeyUpdateSession(t, suite)
			keys := mustKeyLog(t, s.keylog)
			for _, m := range feedModes {
				sink := &capSink{}
				c := NewConn(keys, sink, Options{MaxPending: 1 << 20})
				feedAll(t, c, m.cut(s, newRand(3)))
				for d := range sink.data {
					if !bytes.Equal(sink.data[d], s.plain[d]) {
						t.Fatalf("%s %s: got %d bytes, want %d", m.name, Direction(d), len(sink.data[d]), len(s.plain[d]))
					}
				}
				in := c.Info()
				if !in.Decrypted || in.Dir[0].KeyUpdates != 1 || in.Dir[1].KeyUpdates != 1 || in.Cipher != suite {
					t.Fatalf("%s: Info = %+v; want decrypted, one KeyUpdate each way", m.name, in)
				}
			}
		})
	}
}

func runKeyUpdateSession(t *testing.T, suite uint16) *session {
	testCerts(t)
	old, oldNoAES := defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES
	defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES = []uint16{suite}, []uint16{suite}
	defer func() { defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES = old, oldNoAES }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rec := &recorder{}
	var keylog syncBuffer
	reqA, respA := pattern(30000, 1), pattern(50000, 2)
	reqB, respB := pattern(40000, 3), pattern(70000, 4)
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- func() error {
			raw, err := ln.Accept()
			if err != nil {
				return err
			}
			sc := tls.Server(&recConn{Conn: raw, dir: ServerToClient, rec: rec}, &tls.Config{Certificates: []tls.Certificate{ecdsaCert}})
			defer sc.Close()
			for _, x := range [][2][]byte{{reqA, respA}, {reqB, respB}} {
				got := make([]byte, len(x[0]))
				if _, err := io.ReadFull(sc, got); err != nil || !bytes.Equal(got, x[0]) {
					return fmt.Errorf("server read: %v", err)
				}
				if _, err := sc.Write(x[1]); err != nil {
					return err
				}
			}
			sc.Read(make([]byte, 1)) // until the client goes away
			return nil
		}()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc := &recConn{Conn: raw, dir: ClientToServer, rec: rec}
	cc := tls.Client(rc, &tls.Config{ServerName: "kube.test", RootCAs: certPool, KeyLogWriter: &keylog})
	if _, err := cc.Write(reqA); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cc, make([]byte, len(respA))); err != nil {
		t.Fatal(err)
	}
	// The client's current keys and sequence number: decrypt what it sent.
	c := NewConn(mustKeyLog(t, keylog.b.Bytes()), nil, Options{})
	rec.mu.Lock()
	for _, ch := range rec.chunks {
		if err := c.Feed(ch.dir, ch.data, 0); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Unlock()
	k := c.half[ClientToServer].cur
	if k == nil || c.half[ClientToServer].phase != phaseApp {
		t.Fatal("client keys not found")
	}
	if _, err := rc.Write(sealRecord13(k, typeHandshake, hsMsg(hsKeyUpdate, []byte{1}), 0)); err != nil {
		t.Fatal(err)
	}
	k = mustNext(t, k)
	for p := reqB; len(p) > 0; {
		n := min(len(p), MaxPlaintext)
		if _, err := rc.Write(sealRecord13(k, typeAppData, p[:n], 0)); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	// The server answers with its own KeyUpdate, which the Go client
	// handles while reading the response.
	if _, err := io.ReadFull(cc, make([]byte, len(respB))); err != nil {
		t.Fatalf("client read after KeyUpdate: %v", err)
	}
	raw.Close() // no close_notify: the client's own keys are stale
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
	s := &session{keylog: keylog.b.Bytes(), plain: [2][]byte{append(bytes.Clone(reqA), reqB...), append(bytes.Clone(respA), respB...)}}
	rec.mu.Lock()
	s.chunks = rec.chunks
	rec.mu.Unlock()
	return s
}
