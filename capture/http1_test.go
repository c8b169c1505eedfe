package capture

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/formats"
)

// step is one piece of traffic fed to an HTTP/1.1 connection.
type step struct {
	dir  formats.Direction
	data string
	gap  int64 // if > 0: a gap of this many bytes instead of data
	fin  bool  // the direction ends
}

func toServer(s string) step { return step{dir: formats.ClientToServer, data: s} }
func toClient(s string) step { return step{dir: formats.ServerToClient, data: s} }

// runH1 feeds steps to a fresh HTTP/1.1 connection, each piece cut into
// chunks of size split (0: whole), and returns the records.
func runH1(steps []step, split int, finish formats.EndStatus) []formats.Record {
	sink := &memSink{}
	s := newSession(sink, false)
	c := newH1Conn(s, 7, [2]bool{})
	t := int64(1000)
	for _, st := range steps {
		t++
		switch {
		case st.gap > 0:
			c.gap(st.dir, st.gap, t)
		case st.fin:
			c.fin(st.dir, t)
		default:
			p := []byte(st.data)
			for len(p) > 0 {
				n := len(p)
				if split > 0 && n > split {
					n = split
				}
				c.data(st.dir, p[:n], t)
				p = p[n:]
			}
		}
	}
	c.finish(finish, t+1)
	return sink.recs
}

// summary describes records compactly: one line per record, without times.
func summary(recs []formats.Record) []string {
	var out []string
	for _, r := range recs {
		switch v := r.(type) {
		case *formats.Request:
			if v.Missing {
				out = append(out, fmt.Sprintf("req %d missing", v.Exchange))
			} else {
				out = append(out, fmt.Sprintf("req %d %s %s", v.Exchange, v.Method, v.Target))
			}
		case *formats.Response:
			out = append(out, fmt.Sprintf("resp %d %d framing=%d events=%d", v.Exchange, v.Status, v.Framing, v.Events))
		case *formats.Body:
			out = append(out, fmt.Sprintf("body %d %s @%d %q", v.Exchange, v.Dir, v.Offset, v.Data))
		case *formats.Frame:
			out = append(out, fmt.Sprintf("frame %d #%d %q", v.Exchange, v.Seq, v.Data))
		case *formats.Chunk:
			out = append(out, fmt.Sprintf("chunk %d @%d+%d", v.Exchange, v.Offset, v.Size))
		case *formats.End:
			out = append(out, fmt.Sprintf("end %d %s %s size=%d", v.Exchange, v.Dir, v.Status, v.Size))
		case *formats.Anomaly:
			out = append(out, fmt.Sprintf("anomaly %d %s %s", v.Exchange, v.Dir, v.Kind))
		}
	}
	return out
}

// merged joins consecutive body records of one exchange and direction, so
// results do not depend on how input was split.
func merged(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "body ") && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "body ") {
			prev := out[len(out)-1]
			pf := strings.Fields(prev)
			lf := strings.Fields(l)
			if pf[1] == lf[1] && pf[2] == lf[2] {
				pq := prev[strings.Index(prev, `"`):]
				lq := l[strings.Index(l, `"`):]
				out[len(out)-1] = prev[:strings.Index(prev, `"`)] + pq[:len(pq)-1] + lq[1:]
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

func TestHTTP1(t *testing.T) {
	watch := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1a\r\n{\"type\":\"ADDED\",\"object\":{\r\n" +
		"4\r\n}}\n{\r\n" +
		"1d\r\n\"type\":\"DELETED\",\"object\":{}}\r\n" +
		"1\r\n\n\r\n0\r\n\r\n"
	tests := []struct {
		name   string
		steps  []step
		finish formats.EndStatus
		want   []string
	}{{
		name: "keep-alive list then watch",
		steps: []step{
			toServer("GET /api/v1/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\n\r\n"),
			toClient("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"),
			toServer("GET /api/v1/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n"),
			toClient(watch),
		},
		want: []string{
			"req 0 GET /api/v1/configmaps", "end 0 client→server complete size=0",
			"resp 0 200 framing=1 events=0", `body 0 server→client @0 "{\"a\":1}"`, "end 0 server→client complete size=7",
			"req 1 GET /api/v1/configmaps?watch=true", "end 1 client→server complete size=0",
			"resp 1 200 framing=2 events=1",
			"chunk 1 @0+26", `frame 1 #0 "{\"type\":\"ADDED\",\"object\":{}}"`, "chunk 1 @26+4",
			`frame 1 #1 "{\"type\":\"DELETED\",\"object\":{}}"`, "chunk 1 @30+29", "chunk 1 @59+1",
			"end 1 server→client complete size=60",
		},
	}, {
		name: "pipelining, HEAD, 204, 304, interim 100",
		steps: []step{
			toServer("HEAD /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\n\r\nGET /d HTTP/1.1\r\n\r\n"),
			toClient("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" +
				"HTTP/1.1 204 No Content\r\n\r\n" +
				"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n" +
				"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
		},
		want: []string{
			"req 0 HEAD /a", "end 0 client→server complete size=0",
			"req 1 GET /b", "end 1 client→server complete size=0",
			"req 2 GET /c", "end 2 client→server complete size=0",
			"req 3 GET /d", "end 3 client→server complete size=0",
			"resp 0 200 framing=0 events=0", "end 0 server→client complete size=0",
			"resp 1 204 framing=0 events=0", "end 1 server→client complete size=0",
			"resp 2 304 framing=0 events=0", "end 2 server→client complete size=0",
			"resp 3 200 framing=1 events=0", `body 3 server→client @0 "ok"`, "end 3 server→client complete size=2",
		},
	}, {
		name: "chunked request body, until-close response",
		steps: []step{
			toServer("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n"),
			toClient("HTTP/1.0 200 OK\r\n\r\nall of"), toClient(" it"),
			{dir: formats.ServerToClient, fin: true},
		},
		want: []string{
			"req 0 POST /x", `body 0 client→server @0 "abc"`, "end 0 client→server complete size=3",
			"resp 0 200 framing=3 events=0", `body 0 server→client @0 "all of it"`, "end 0 server→client complete size=9",
		},
	}, {
		name: "malformed head, then resync",
		steps: []step{
			toServer("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"),
			toClient("HTTP/1.1 2x0 Bad\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
		},
		finish: formats.EndTruncated,
		want: []string{
			"req 0 GET /a", "end 0 client→server complete size=0",
			"req 1 GET /b", "end 1 client→server complete size=0",
			"anomaly -1 server→client malformed",
			"resp 0 200 framing=1 events=0", "end 0 server→client complete size=0",
		},
	}, {
		name: "gap inside a content-length body",
		steps: []step{
			toServer("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"),
			toClient("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01"),
			{dir: formats.ServerToClient, gap: 3},
			toClient("56789HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz"),
		},
		want: []string{
			"req 0 GET /a", "end 0 client→server complete size=0",
			"req 1 GET /b", "end 1 client→server complete size=0",
			"resp 0 200 framing=1 events=0", `body 0 server→client @0 "01"`,
			"anomaly 0 server→client gap",
			`body 0 server→client @5 "56789"`, "end 0 server→client gap size=10",
			"resp 1 200 framing=1 events=0", `body 1 server→client @0 "z"`, "end 1 server→client complete size=1",
		},
	}, {
		name: "connection reset inside a watch",
		steps: []step{
			toServer("GET /api/v1/namespaces/x/configmaps?watch=1 HTTP/1.1\r\n\r\n"),
			toClient("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"type\":\"ADDED\",\r\n"),
		},
		finish: formats.EndReset,
		want: []string{
			"req 0 GET /api/v1/namespaces/x/configmaps?watch=1", "end 0 client→server complete size=0",
			"resp 0 200 framing=2 events=1", "chunk 0 @0+16",
			"anomaly 0 server→client truncated", "end 0 server→client reset size=16",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, split := range []int{0, 1, 3, 7} {
				got := merged(summary(runH1(tt.steps, split, tt.finish)))
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("split %d:\ngot:\n  %s\nwant:\n  %s", split, strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
				}
			}
		})
	}
}

func TestHTTP1Redaction(t *testing.T) {
	recs := runH1([]step{
		toServer("GET / HTTP/1.1\r\nAuthorization: Bearer abc123\r\nCookie: s=1\r\n\r\n"),
		toClient("HTTP/1.1 200 OK\r\nSet-Cookie: s=2\r\nContent-Length: 0\r\n\r\n"),
	}, 0, formats.EndTruncated)
	for _, r := range recs {
		var h []formats.Header
		switch v := r.(type) {
		case *formats.Request:
			h = v.Header
		case *formats.Response:
			h = v.Header
		}
		for _, f := range h {
			if f.Name == "Content-Length" {
				continue
			}
			if !f.Redacted || f.Value != "" || f.Len == 0 {
				t.Errorf("%T header %s = %q (redacted %v, len %d)", r, f.Name, f.Value, f.Redacted, f.Len)
			}
		}
	}
}

func TestParseHead(t *testing.T) {
	tests := []struct {
		in      string
		request bool
		want    string
		err     bool
	}{
		{"GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n", true, "GET /a?b=1 HTTP/1.1 len=-1", false},
		{"GET /a HTTP/1.1\nHost: x\n\n", true, "GET /a HTTP/1.1 len=-1", false},
		{"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", true, "POST / HTTP/1.1 len=5", false},
		{"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", true, "POST / HTTP/1.1 len=-1 bad", false},
		{"HTTP/1.1 200 OK\r\nX: a\r\n  b\r\n\r\n", false, "200 OK len=-1 X=a b", false},
		{"HTTP/1.1 200\r\n\r\n", false, "200  len=-1", false},
		{"get / HTTP/1.1\r\n\r\n", true, "", true},
		{"GET / HTTP/2.0\r\n\r\n", true, "", true},
		{"HTTP/1.1 20 OK\r\n\r\n", false, "", true},
		{"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", false, "", true},
		{"HTTP/1.1 200 OK\r\n continuation\r\n\r\n", false, "", true},
	}
	for _, tt := range tests {
		m, err := parseHead([]byte(tt.in), tt.request)
		if tt.err {
			if err == nil {
				t.Errorf("parseHead(%q) succeeded; want an error", tt.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseHead(%q) = %v", tt.in, err)
			continue
		}
		var got string
		if m.request {
			got = fmt.Sprintf("%s %s %s len=%d", m.method, m.target, m.proto, m.length)
		} else {
			got = fmt.Sprintf("%d %s len=%d", m.status, m.reason, m.length)
			for _, h := range m.header {
				got += " " + h.Name + "=" + h.Value
			}
		}
		if m.badLength {
			got += " bad"
		}
		if got != tt.want {
			t.Errorf("parseHead(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzHTTP1 feeds arbitrary bytes as both directions of a connection, in
// pieces, with gaps: nothing panics, and every exchange that gets a
// Response record was announced by a Request record first.
func FuzzHTTP1(f *testing.F) {
	f.Add([]byte("GET /api/v1/configmaps?watch=true HTTP/1.1\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\n{\"type\":\"ADDED\",\"object\":{\r\n2\r\n}}\r\n0\r\n\r\n"), uint8(3), false)
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n"), []byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\nbody"), uint8(1), true)
	f.Add([]byte(""), []byte("abc\r\n8\r\n{\"type\":\r\n"), uint8(5), true)
	f.Fuzz(func(t *testing.T, client, server []byte, split uint8, midstream bool) {
		sink := &memSink{}
		s := newSession(sink, false)
		c := newH1Conn(s, 1, [2]bool{midstream, midstream})
		n := int(split%16) + 1
		for i := 0; i < len(client) || i < len(server); i += n {
			if i < len(client) {
				c.data(formats.ClientToServer, client[i:min(i+n, len(client))], int64(i))
			}
			if i < len(server) {
				c.data(formats.ServerToClient, server[i:min(i+n, len(server))], int64(i))
			}
			if split%7 == 0 && i == n {
				c.gap(formats.ServerToClient, 5, int64(i))
			}
		}
		c.fin(formats.ClientToServer, 1<<20)
		c.finish(formats.EndTruncated, 1<<20)
		seen := map[int64]bool{}
		for _, r := range sink.recs {
			switch v := r.(type) {
			case *formats.Request:
				seen[v.Exchange] = true
			case *formats.Response:
				if !seen[v.Exchange] {
					t.Fatalf("response of exchange %d before its request", v.Exchange)
				}
			}
		}
	})
}
