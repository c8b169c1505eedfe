// Command mkfixtures regenerates frame's test fixtures from the shared
// capture corpus and the repository's own captures (testdata/corpus, made
// by tools/mkcorpus). It needs tshark and the corpus; the fixtures
// it writes are committed, so tests need neither.
//
//	cd frame && go run ./testdata/mkfixtures -corpus ../../shared/corpus -own ../testdata/corpus -out testdata
//
// For every fixture it takes the HTTP response body as tshark reassembles it
// (`-z follow,http,raw,N`: de-chunked; for TLS and HTTP/2, decrypted with the
// scenario's key log and `-z follow,http2,raw,N,S`, the DATA frames' payload),
// or, for the midstream capture (no HTTP headers), the server's TCP payload
// de-chunked here. It writes <name>.body, fixtures.json (one entry per body)
// and truth.jsonl (the corpus truth lines of those bodies, trimmed to the
// fields tests use).
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Fixture describes one body file; fixtures.json is a list of them.
type Fixture struct {
	Name        string `json:"name"`
	Scenario    string `json:"scenario"`
	ReqID       int    `json:"req_id"`
	Kind        string `json:"kind"` // watch, list, midstream
	ContentType string `json:"content_type"`
	Request     string `json:"request"`
	File        string `json:"file"`
	Size        int    `json:"size"`
	// BodyOffset is the watch-body offset of the file's first byte
	// (non-zero only for midstream).
	BodyOffset int64 `json:"body_offset"`
}

type want struct {
	name, scenario, kind string
	req                  int
	maxBytes             int  // midstream: keep at most this many body bytes
	own                  bool // a scenario of the repository's testdata/corpus
}

var wants = []want{
	{"basic-json-list", "basic-json", "list", 0, 0, false},
	{"basic-json-watch", "basic-json", "watch", 1, 0, false},
	{"gone-410-g1-error", "gone-410", "watch", 0, 0, false},
	{"gone-410-g2-error", "gone-410", "watch", 2, 0, false},
	{"gone-410-g1-watch", "gone-410", "watch", 3, 0, false},
	{"multi-watch-a-watchlist", "multi-watch", "watch", 2, 0, false},
	{"multi-watch-f-list-continue", "multi-watch", "list", 8, 0, false},
	{"multi-watch-f-watch", "multi-watch", "watch", 6, 0, false},
	{"protobuf-p1-list", "protobuf", "list", 0, 0, false},
	{"protobuf-p1-watch", "protobuf", "watch", 2, 0, false},
	{"midstream-m1", "midstream", "midstream", 1, 430000, false},
	{"table-watch-configmaps", "table-watch", "watch", 3, 0, true},
	{"table-watch-secrets", "table-watch", "watch", 5, 0, true},
	{"metadata-informer-protobuf", "metadata-informer", "watch", 1, 0, true},
	{"metadata-informer-json", "metadata-informer", "watch", 3, 0, true},
	{"cbor-informer-configmaps", "cbor-informer", "watch", 0, 0, true},
	{"cbor-informer-secrets", "cbor-informer", "watch", 1, 0, true},
	{"cbor-informer-list", "cbor-informer", "list", 6, 0, true},
}

// truth fields kept in truth.jsonl.
var keep = []string{"req_id", "index", "type", "kind", "apiVersion", "namespace", "name", "resourceVersion",
	"event_len", "event_sha256", "object_len", "object_sha256", "body_offset", "body_end",
	"status_code", "status_reason", "status_message", "in_capture"}

func main() {
	shared := flag.String("corpus", "../../shared/corpus", "corpus directory")
	own := flag.String("own", "../testdata/corpus", "the repository's own captures")
	out := flag.String("out", "testdata", "output directory")
	flag.Parse()
	var fixtures []Fixture
	var truthOut bytes.Buffer
	for _, w := range wants {
		corpus := shared
		if w.own {
			corpus = own
		}
		meta := readMeta(filepath.Join(*corpus, w.scenario, "meta.json"))
		req := meta.Requests[w.req]
		pcap := filepath.Join(*corpus, w.scenario, "capture.pcap")
		var body []byte
		var off int64
		switch {
		case w.kind == "midstream":
			body, off = midstreamBody(pcap, meta, w.req, w.maxBytes)
		case req.Proto == "HTTP/2.0":
			body = http2Body(pcap, filepath.Join(*corpus, w.scenario, "keylog.txt"), meta, w.req)
			if len(body) != req.BodyBytes {
				log.Fatalf("%s: body %d bytes, meta says %d", w.name, len(body), req.BodyBytes)
			}
		default:
			body = httpBody(pcap, meta, w.req)
			if len(body) != req.BodyBytes {
				log.Fatalf("%s: body %d bytes, meta says %d", w.name, len(body), req.BodyBytes)
			}
		}
		ct := req.RespHeaders["Content-Type"]
		f := Fixture{Name: w.name, Scenario: w.scenario, ReqID: w.req, Kind: w.kind,
			ContentType: ct, Request: req.Request,
			File: w.name + ".body", Size: len(body), BodyOffset: off}
		if err := os.WriteFile(filepath.Join(*out, f.File), body, 0o644); err != nil {
			log.Fatal(err)
		}
		fixtures = append(fixtures, f)
		if w.kind != "list" {
			n := truthLines(&truthOut, filepath.Join(*corpus, w.scenario, "truth.jsonl"), w, off, off+int64(len(body)))
			if n == 0 {
				log.Fatalf("%s: no truth events", w.name)
			}
			log.Printf("%s: %d bytes, %d events", w.name, len(body), n)
		} else {
			log.Printf("%s: %d bytes", w.name, len(body))
		}
	}
	js, _ := json.MarshalIndent(fixtures, "", "  ")
	must(os.WriteFile(filepath.Join(*out, "fixtures.json"), append(js, '\n'), 0o644))
	must(os.WriteFile(filepath.Join(*out, "truth.jsonl"), truthOut.Bytes(), 0o644))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

type metaFile struct {
	Requests []struct {
		ID          int               `json:"id"`
		Conn        string            `json:"conn"`
		Server      string            `json:"server"`
		Proto       string            `json:"proto"`
		Request     string            `json:"request"`
		BodyBytes   int               `json:"body_bytes"`
		RespHeaders map[string]string `json:"resp_headers"`
	} `json:"requests"`
	Midstream []struct {
		ReqID                 int   `json:"req_id"`
		BodyOffsetOfCapture   int64 `json:"body_offset_of_capture_start"`
		PartialChunkDataBytes int   `json:"partial_chunk_data_bytes_at_start"`
	} `json:"midstream"`
}

func readMeta(path string) *metaFile {
	b, err := os.ReadFile(path)
	must(err)
	var m metaFile
	must(json.Unmarshal(b, &m))
	return &m
}

func tshark(args ...string) []byte {
	cmd := exec.Command("tshark", args...)
	cmd.Stderr = nil
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("tshark %v: %v", args, err)
	}
	return out
}

// streamOf returns the tcp.stream index of the connection whose client is conn.
func streamOf(pcap, conn string) string {
	port := conn[strings.LastIndexByte(conn, ':')+1:]
	out := tshark("-r", pcap, "-T", "fields", "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport")
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[1] == port || f[2] == port) {
			return f[0]
		}
	}
	log.Fatalf("%s: no stream for %s", pcap, conn)
	return ""
}

// serverLines returns the server-side hex lines of a tshark follow output:
// node 1's lines are tab-indented, and the server is the node whose address
// ends in serverPort. Gap markers ("[N bytes missing in capture file]") are
// dropped.
func serverLines(out []byte, serverPort string) [][]byte {
	var lines [][]byte
	serverIndented := true
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		l := sc.Bytes()
		if bytes.HasPrefix(l, []byte("Node 0: ")) {
			serverIndented = !bytes.HasSuffix(l, []byte(":"+serverPort))
			continue
		}
		if len(l) == 0 || bytes.IndexFunc(l, func(r rune) bool { return r != '\t' && !strings.ContainsRune("0123456789abcdef", r) }) >= 0 {
			continue
		}
		indented := l[0] == '\t'
		if indented != serverIndented {
			continue
		}
		b, err := hex.DecodeString(string(bytes.TrimPrefix(l, []byte("\t"))))
		must(err)
		if bytes.HasPrefix(b, []byte("[")) && bytes.Contains(b, []byte("missing in capture")) {
			continue
		}
		lines = append(lines, b)
	}
	return lines
}

// serverPort returns the port of a server address ("8001" when absent,
// the shared corpus's kubectl proxy).
func serverPort(server string) string {
	if i := strings.LastIndexByte(server, ':'); i >= 0 {
		return server[i+1:]
	}
	return "8001"
}

// http2Body returns the body of request req, an HTTP/2 stream of a TLS
// connection: tshark decrypts with the key log, finds the stream by the
// connection and the request's :path, and follows it; the server's DATA
// frames' payloads (padding removed) are the body.
func http2Body(pcap, keylog string, m *metaFile, req int) []byte {
	r := m.Requests[req]
	kl := "tls.keylog_file:" + keylog
	tcpStream := streamOf(pcap, r.Conn)
	out := tshark("-r", pcap, "-o", kl, "-Y", "tcp.stream eq "+tcpStream+" && http2.headers.path",
		"-T", "fields", "-e", "http2.streamid", "-e", "http2.headers.path")
	var sid string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 2 && f[1] == r.Request {
			if sid != "" {
				log.Fatalf("%s: two streams for %s", pcap, r.Request)
			}
			sid = strings.Split(f[0], ",")[0]
		}
	}
	if sid == "" {
		log.Fatalf("%s: no HTTP/2 stream for %s", pcap, r.Request)
	}
	var body []byte
	for _, l := range serverLines(tshark("-r", pcap, "-o", kl, "-q", "-z", "follow,http2,raw,"+tcpStream+","+sid), serverPort(r.Server)) {
		// A line is either the decoded header block (skipped) or whole
		// frames: 3 length, 1 type, 1 flags, 4 stream, payload.
		var data []byte
		ok := len(l) >= 9
		for p := l; ok && len(p) > 0; {
			n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
			if len(p) < 9 || len(p) < 9+n || p[3] != 0 {
				ok = false
				break
			}
			d := p[9 : 9+n]
			if p[4]&0x8 != 0 { // PADDED
				d = d[1 : len(d)-int(d[0])]
			}
			data = append(data, d...)
			p = p[9+n:]
		}
		if ok {
			body = append(body, data...)
		}
	}
	return body
}

// httpBody returns the de-chunked body of request req, the k-th response on
// its connection.
func httpBody(pcap string, m *metaFile, req int) []byte {
	conn := m.Requests[req].Conn
	k := 0
	for _, r := range m.Requests[:req] {
		if r.Conn == conn {
			k++
		}
	}
	lines := serverLines(tshark("-r", pcap, "-q", "-z", "follow,http,raw,"+streamOf(pcap, conn)), serverPort(m.Requests[req].Server))
	// Each response is a header line (starts "HTTP/") then its body line.
	i := -1
	for j, l := range lines {
		if bytes.HasPrefix(l, []byte("HTTP/1.")) {
			i++
			if i == k {
				if j+1 < len(lines) && !bytes.HasPrefix(lines[j+1], []byte("HTTP/1.")) {
					return lines[j+1]
				}
				return nil
			}
		}
	}
	// tshark does not reassemble a response the client cut (kubectl
	// stopped with Ctrl-C): parse the server's TCP payload with net/http.
	raw := bytes.Join(serverLines(tshark("-r", pcap, "-q", "-z", "follow,tcp,raw,"+streamOf(pcap, conn)), serverPort(m.Requests[req].Server)), nil)
	br := bufio.NewReader(bytes.NewReader(raw))
	for i := 0; ; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			log.Fatalf("%s: response %d of %s not found: %v", pcap, k, conn, err)
		}
		b, err := io.ReadAll(resp.Body)
		if i == k {
			return b
		}
		if err != nil {
			log.Fatalf("%s: response %d of %s cut: %v", pcap, i, conn, err)
		}
	}
}

// midstreamBody de-chunks the captured server payload of a connection that
// the capture joined in the middle of a chunk, and keeps at most max bytes
// (cut at the end of an event, so the fixture ends cleanly).
func midstreamBody(pcap string, m *metaFile, req, max int) ([]byte, int64) {
	var off int64
	partial := -1
	for _, ms := range m.Midstream {
		if ms.ReqID == req {
			off, partial = ms.BodyOffsetOfCapture, ms.PartialChunkDataBytes
		}
	}
	if partial < 0 {
		log.Fatalf("no midstream entry for request %d", req)
	}
	raw := bytes.Join(serverLines(tshark("-r", pcap, "-q", "-z", "follow,tcp,raw,"+streamOf(pcap, m.Requests[req].Conn)), serverPort(m.Requests[req].Server)), nil)
	body := append([]byte(nil), raw[:partial]...)
	p := raw[partial:]
	for {
		if !bytes.HasPrefix(p, []byte("\r\n")) && len(body) > 0 {
			log.Fatalf("midstream: no CRLF after chunk data at %d", len(raw)-len(p))
		}
		p = p[2:]
		i := bytes.Index(p, []byte("\r\n"))
		n, err := strconv.ParseInt(string(p[:i]), 16, 64)
		must(err)
		p = p[i+2:]
		if n == 0 || int(n) > len(p) {
			break
		}
		body = append(body, p[:n]...)
		p = p[n:]
		if len(body) > max {
			break
		}
	}
	if len(body) > max {
		body = body[:max]
	}
	// Cut after the last "}\n" so the fixture holds whole events only at its end.
	if i := bytes.LastIndex(body, []byte("}\n")); i >= 0 {
		body = body[:i+2]
	}
	return body, off
}

func truthLines(w *bytes.Buffer, path string, fx want, start, end int64) int {
	b, err := os.ReadFile(path)
	must(err)
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var t map[string]any
		must(json.Unmarshal(line, &t))
		if int(t["req_id"].(float64)) != fx.req {
			continue
		}
		bo, be := int64(t["body_offset"].(float64)), int64(t["body_end"].(float64))
		if bo < start || be > end {
			continue
		}
		o := map[string]any{"fixture": fx.name}
		for _, k := range keep {
			if v, ok := t[k]; ok {
				o[k] = v
			}
		}
		js, err := json.Marshal(o)
		must(err)
		w.Write(js)
		w.WriteByte('\n')
		n++
	}
	return n
}
