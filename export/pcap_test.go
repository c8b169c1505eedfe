package export

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// tshark runs tshark on a pcap and returns its standard output; it skips
// t when tshark is not installed.
func tshark(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed")
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// decodeAs returns tshark's -d options: each server port of the session
// dissected as HTTP, or HTTP/2 for connections exported as h2c.
func decodeAs(f *formats.File) (args []string, h2 map[uint64]bool) {
	h2 = map[uint64]bool{}
	ports := map[string]string{}
	for i := range f.Index().Conns {
		c := &f.Index().Conns[i]
		var exs []*formats.ExchangeInfo
		for _, id := range c.Exchanges {
			exs = append(exs, f.Exchange(id))
		}
		proto := "http"
		if isH2(c, exs) {
			proto, h2[c.Conn.ID] = "http2", true
		}
		if _, port, ok := strings.Cut(c.Conn.Server, "]:"); ok {
			ports[port] = proto
		} else if i := strings.LastIndexByte(c.Conn.Server, ':'); i >= 0 {
			ports[c.Conn.Server[i+1:]] = proto
		}
	}
	for port, proto := range ports {
		args = append(args, "-d", "tcp.port=="+port+","+proto)
	}
	return args, h2
}

// tsharkPacket is one packet of tshark -T json --no-duplicate-keys.
type tsharkPacket struct {
	Source struct {
		Layers map[string]json.RawMessage `json:"layers"`
	} `json:"_source"`
}

// objects returns a layer that may be one object or several.
func objects(raw json.RawMessage) []map[string]json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var one map[string]json.RawMessage
	if json.Unmarshal(raw, &one) == nil {
		return []map[string]json.RawMessage{one}
	}
	var many []map[string]json.RawMessage
	json.Unmarshal(raw, &many)
	return many
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil && len(ss) > 0 {
		return ss[0]
	}
	return ""
}

// conn returns what the index says of connection id.
func conn(idx *formats.Index, id uint64) *formats.ConnInfo {
	for i := range idx.Conns {
		if idx.Conns[i].Conn.ID == id {
			return &idx.Conns[i]
		}
	}
	return &formats.ConnInfo{}
}

// clientPort returns the port of an "ip:port" address.
func clientPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	n, _ := strconv.Atoi(addr[i+1:])
	return n
}

// TestPcapTshark: tshark reads the pcap export of every corpus session
// (recorded with Secret values kept, so that bodies are the apiserver's
// bytes) and reassembles every HTTP response with the body the session
// holds: HTTP/1.1 responses that ended by their framing through tshark's
// HTTP dissector (de-chunked and decompressed as it does); responses cut
// by a FIN, RST or the end of the capture (which no dissector completes)
// through tshark's reassembly of their TCP stream, read by net/http; and
// HTTP/2 (exported as h2c) through the DATA frames tshark dissects, per
// stream.
func TestPcapTshark(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed")
	}
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			wt := record(t, sc, true)
			f := wttest.OpenSession(t, wt)
			pcap, _ := exportFile(t, "s.pcap", func(w io.Writer) (Result, error) { return Pcap(w, f, PcapOptions{}) })
			da, h2 := decodeAs(f)
			want := bodies(t, f, formats.ServerToClient)

			idx := f.Index()
			checked := 0

			// HTTP/1.1 responses that ended by their framing, as
			// tshark's HTTP dissector reassembles them (--export-objects
			// writes each body, de-chunked and decoded).
			eo := filepath.Join(t.TempDir(), "objects")
			tshark(t, append([]string{"-r", pcap, "-q", "--export-objects", "http," + eo}, da...)...)
			got := map[[32]byte]int{}
			files, _ := os.ReadDir(eo)
			for _, fi := range files {
				b, err := os.ReadFile(filepath.Join(eo, fi.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > 0 {
					got[sha256.Sum256(b)]++
				}
			}
			wantSums := map[[32]byte]int{}
			var cut []*formats.ExchangeInfo
			for _, c := range idx.Conns {
				if h2[c.Conn.ID] {
					continue
				}
				for _, id := range c.Exchanges {
					x := f.Exchange(id)
					if x.Response == nil || x.Response.Midstream {
						continue
					}
					if x.End == nil || x.End.Status != formats.EndComplete {
						cut = append(cut, x)
						continue
					}
					if w := want[id]; w != nil && len(w.read) > 0 {
						wantSums[sha256.Sum256(w.read)]++
					}
					checked++
				}
			}
			for sum, n := range wantSums {
				if got[sum] != n {
					t.Errorf("a response body of the session (sha256 %x…) is %d times among tshark's HTTP objects; want %d", sum[:8], got[sum], n)
				}
			}
			midstream := false
			for _, x := range idx.Exchanges {
				midstream = midstream || x.Response != nil && x.Response.Midstream
			}
			for sum, n := range got {
				// (bytes of a response captured from its middle are
				// objects to tshark, not to the session)
				if wantSums[sum] == 0 && !midstream {
					t.Errorf("tshark reassembled %d HTTP objects (sha256 %x…) the session does not hold", n, sum[:8])
				}
			}

			// Responses cut by a FIN, RST or the end of the capture: no
			// dissector completes them; tshark's reassembly of their TCP
			// stream, read by net/http, holds what the session holds.
			if len(cut) > 0 {
				streamOf := map[int]int{} // client port → tshark's stream
				servers := map[int]bool{}
				for _, c := range idx.Conns {
					servers[clientPort(c.Conn.Server)] = true
				}
				fields := tshark(t, append([]string{"-r", pcap, "-T", "fields", "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport", "-Y", "tcp.len>0"}, da...)...)
				sc := bufio.NewScanner(bytes.NewReader(fields))
				for sc.Scan() {
					var s, a, b int
					fmt.Sscanf(sc.Text(), "%d\t%d\t%d", &s, &a, &b)
					if servers[a] {
						a = b
					}
					streamOf[a] = s
				}
				var follow []int
				for _, x := range cut {
					follow = append(follow, streamOf[clientPort(conn(idx, x.Request.Conn).Conn.Client)])
				}
				followed := followServer(t, pcap, follow, da)
				for _, x := range cut {
					c := conn(idx, x.Request.Conn)
					stream := followed[streamOf[clientPort(c.Conn.Client)]]
					w := want[x.Request.Exchange]
					if w == nil {
						w = &body{}
					}
					resp, err := lastResponse(stream, x.Request.Method)
					if err != nil {
						t.Errorf("exchange %d (cut, %v): reading tshark's TCP stream: %v", x.Request.Exchange, x.End, err)
						continue
					}
					if !bytes.Equal(resp, w.read) {
						t.Errorf("exchange %d (cut): the body in tshark's TCP stream (%d bytes) differs from the session's (%d bytes)", x.Request.Exchange, len(resp), len(w.read))
					}
					checked++
				}
			}

			// HTTP/2: the DATA frames of each stream, from the server.
			if len(h2) > 0 {
				checked += checkH2(t, f, pcap, da, h2, want)
			}
			if checked == 0 {
				t.Log("no response head was captured: nothing for tshark to reassemble (TestPcapRoundTrip covers this session)")
				return
			}
			t.Logf("%d responses reassembled by tshark as the session holds them", checked)
		})
	}
}

// followServer returns what the server sent on each of tshark's TCP
// streams (tshark -z follow,tcp,raw,N).
func followServer(t *testing.T, pcap string, streams []int, da []string) map[int][]byte {
	args := append([]string{"-r", pcap, "-q"}, da...)
	seen := map[int]bool{}
	for _, s := range streams {
		if !seen[s] {
			seen[s] = true
			args = append(args, "-z", fmt.Sprintf("follow,tcp,raw,%d", s))
		}
	}
	out := map[int][]byte{}
	cur := -1
	sc := bufio.NewScanner(bytes.NewReader(tshark(t, args...)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "Filter: tcp.stream eq "); ok {
			cur, _ = strconv.Atoi(n)
			continue
		}
		if !strings.HasPrefix(line, "\t") || cur < 0 {
			continue // the client's bytes, or tshark's header lines
		}
		d, err := hex.DecodeString(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("follow output: %v", err)
		}
		out[cur] = append(out[cur], d...)
	}
	return out
}

// lastResponse reads the responses of a server's byte stream with
// net/http and returns the body of the last, as far as the stream goes.
func lastResponse(stream []byte, method string) ([]byte, error) {
	br := bufio.NewReader(bytes.NewReader(stream))
	var last []byte
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			if last != nil && errors.Is(err, io.EOF) {
				return last, nil
			}
			return last, err
		}
		b, err := io.ReadAll(resp.Body)
		last = b
		if err != nil {
			return last, nil // cut: what was there
		}
	}
}

// checkH2 compares each HTTP/2 response body with the DATA frames tshark
// dissects on its stream and returns how many it checked.
func checkH2(t *testing.T, f *formats.File, pcap string, da []string, h2 map[uint64]bool, want map[int64]*body) int {
	var pkts []tsharkPacket
	out := tshark(t, append([]string{"-r", pcap, "-T", "json", "--no-duplicate-keys", "-Y", "http2"}, da...)...)
	if err := json.Unmarshal(out, &pkts); err != nil {
		t.Fatalf("tshark json: %v", err)
	}
	type key struct{ port, stream int }
	data := map[key][]byte{}
	status := map[key]string{}
	ends := map[key]bool{}
	for _, p := range pkts {
		var tcp map[string]json.RawMessage
		json.Unmarshal(p.Source.Layers["tcp"], &tcp)
		port, _ := strconv.Atoi(str(tcp["tcp.dstport"]))
		for _, h := range objects(p.Source.Layers["http2"]) {
			for _, fr := range objects(h["http2.stream"]) {
				id, _ := strconv.Atoi(str(fr["http2.streamid"]))
				k := key{port, id}
				switch str(fr["http2.type"]) {
				case "0":
					if d := str(fr["http2.data.data"]); d != "" {
						b, err := hex.DecodeString(strings.ReplaceAll(d, ":", ""))
						if err != nil {
							t.Fatalf("http2.data.data: %v", err)
						}
						if fr["http2.body.fragments"] != nil {
							data[k] = b // tshark reassembled the whole body in the stream's last frame
						} else {
							data[k] = append(data[k], b...)
						}
					}
					var flags map[string]json.RawMessage
					json.Unmarshal(fr["http2.flags_tree"], &flags)
					if str(flags["http2.flags.end_stream"]) == "1" {
						ends[k] = true
					}
				case "1":
					for _, hd := range objects(fr["http2.header"]) {
						if str(hd["http2.header.name"]) == ":status" {
							status[k] = str(hd["http2.header.value"])
						}
					}
				}
			}
		}
	}
	n := 0
	for _, c := range f.Index().Conns {
		if !h2[c.Conn.ID] {
			continue
		}
		port := clientPort(c.Conn.Client)
		for _, id := range c.Exchanges {
			x := f.Exchange(id)
			if x.Response == nil || x.Response.Midstream {
				continue
			}
			k := key{port, int(x.Request.Stream)}
			if status[k] != strconv.Itoa(x.Response.Status) {
				t.Errorf("exchange %d (stream %d): tshark read :status %q; the session %d", id, k.stream, status[k], x.Response.Status)
			}
			var w []byte
			if b := want[id]; b != nil {
				w = b.stored
			}
			if !bytes.Equal(data[k], w) {
				t.Errorf("exchange %d (stream %d): tshark's DATA (%d bytes) differs from the session's body (%d bytes)", id, k.stream, len(data[k]), len(w))
			}
			if complete := x.End != nil && x.End.Status == formats.EndComplete; ends[k] != complete {
				t.Errorf("exchange %d (stream %d): END_STREAM %v; the session's end %v", id, k.stream, ends[k], x.End)
			}
			n++
		}
	}
	return n
}

// TestPcapRoundTrip: recording the pcap export of a session gives the
// session back: the same connections, exchanges (heads, bodies, how they
// ended) and events, byte for byte and at the same times. Sessions
// recorded with Secret values kept, so that recording again redacts
// nothing.
func TestPcapRoundTrip(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			wt := record(t, sc, true)
			f := wttest.OpenSession(t, wt)
			pcap, _ := exportFile(t, "s.pcap", func(w io.Writer) (Result, error) { return Pcap(w, f, PcapOptions{}) })
			again := recordPcap(t, pcap, true)
			g := wttest.OpenSession(t, again)
			compareSessions(t, f, g)
		})
	}
}

// compareSessions checks that g holds what f holds: exchange by
// exchange, the request and response heads, bodies, ends and events.
func compareSessions(t *testing.T, f, g *formats.File) {
	t.Helper()
	fx, gx := f.Index().Exchanges, g.Index().Exchanges
	if len(fx) != len(gx) {
		t.Fatalf("%d exchanges; want %d", len(gx), len(fx))
	}
	fb, gb := bodies(t, f, formats.ServerToClient), bodies(t, g, formats.ServerToClient)
	fq, gq := bodies(t, f, formats.ClientToServer), bodies(t, g, formats.ClientToServer)
	for i := range fx {
		a, b := &fx[i], &gx[i]
		id := a.Request.Exchange
		if a.Request.Method != b.Request.Method || a.Request.Target != b.Request.Target || a.Request.Time != b.Request.Time && !a.Request.Missing {
			t.Errorf("exchange %d: request %s %s at %d; want %s %s at %d", id, b.Request.Method, b.Request.Target, b.Request.Time, a.Request.Method, a.Request.Target, a.Request.Time)
		}
		if (a.Response == nil) != (b.Response == nil) || a.Response != nil && (a.Response.Status != b.Response.Status || a.Response.Events != b.Response.Events ||
			a.Response.Time != b.Response.Time && !a.Response.Midstream) { // (a response captured from its middle begins where the export's bytes do)
			t.Errorf("exchange %d: response %+v; want %+v", id, b.Response, a.Response)
		}
		// Chunks whose bytes the capture lost are not exported (their
		// sizes are, as lost bytes).
		if a.Frames != b.Frames || a.BodyBytes != b.BodyBytes || a.Chunks != b.Chunks && a.Anomalies == 0 {
			t.Errorf("exchange %d: %d events, %d body bytes, %d chunks; want %d, %d, %d", id, b.Frames, b.BodyBytes, b.Chunks, a.Frames, a.BodyBytes, a.Chunks)
		}
		// A response the capture cut ends at its connection's last packet,
		// which may carry nothing an export writes (TCP ACKs, HTTP/2
		// frames of no stream): then the export's ends sooner.
		cut := a.End != nil && a.End.Status == formats.EndTruncated && b.End != nil && b.End.Time <= a.End.Time
		if (a.End == nil) != (b.End == nil) || a.End != nil && (a.End.Status != b.End.Status || a.End.Time != b.End.Time && !cut) {
			t.Errorf("exchange %d: end %+v; want %+v", id, b.End, a.End)
		}
		if x, y := fb[id], gb[id]; (x == nil) != (y == nil) || x != nil && !bytes.Equal(x.stored, y.stored) {
			t.Errorf("exchange %d: the response body differs", id)
		}
		if x, y := fq[id], gq[id]; (x == nil) != (y == nil) || x != nil && !bytes.Equal(x.stored, y.stored) {
			t.Errorf("exchange %d: the request body differs", id)
		}
	}
	events := func(f *formats.File) []string {
		var out []string
		for ev, err := range f.Events() {
			if err != nil {
				t.Fatal(err)
			}
			l := ev.Line(false)
			b, _ := json.Marshal(l)
			out = append(out, fmt.Sprintf("%08d %08d %s", l.Exchange, l.Seq, b))
		}
		sort.Strings(out) // events of concurrent exchanges at one time interleave as they may
		return out
	}
	fe, ge := events(f), events(g)
	if len(fe) != len(ge) {
		t.Fatalf("%d events; want %d", len(ge), len(fe))
	}
	for i := range fe {
		if fe[i] != ge[i] {
			t.Fatalf("event %d:\n got %s\nwant %s", i, ge[i], fe[i])
		}
	}
}

// TestPcapSecrets: the pcap export of a session recorded with redaction
// holds no secret: recorded again with redaction off, it holds none of
// the corpus' credentials and Secret values.
func TestPcapSecrets(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			wt := record(t, sc, false)
			wttest.CheckNoSecrets(t, wt)
			f := wttest.OpenSession(t, wt)
			pcap, _ := exportFile(t, "s.pcap", func(w io.Writer) (Result, error) { return Pcap(w, f, PcapOptions{}) })
			again := recordPcap(t, pcap, true)
			wttest.CheckNoSecrets(t, again)
		})
	}
}
