package export

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// This file turns one exchange's records back into the bytes its two
// sides sent, with the time each run of bytes was on the wire: HTTP/1.1
// messages (heads, bodies with their recorded chunk framing) or HTTP/2
// frames (HEADERS, DATA frames as recorded, RST_STREAM). The pcap export
// (pcap.go) puts them in TCP segments.

// piece is a run of bytes one side sent at one time.
type piece struct {
	t    int64
	dir  formats.Direction
	data []byte // valid until the generator is resumed
	// lost is how many bytes the capture lost before data: the TCP
	// sequence number advances over them, nothing is sent.
	lost int64
}

// maxPending bounds the body bytes an exchange holds while it waits for
// the Chunk record that frames them (the recorder writes it when the chunk
// ends, so a chunk's bytes are normally all that waits). Past it the
// bytes are framed as a chunk of their own.
const maxPending = 64 << 20

// h2MaxFrame is the SETTINGS_MAX_FRAME_SIZE the exported connection
// preface announces on both sides, the largest HTTP/2 allows (RFC 9113
// §6.5.2), so that every recorded DATA frame and header block fits in one
// frame.
const h2MaxFrame = 1<<24 - 1

// wireOptions say how an exchange is put back on the wire.
type wireOptions struct {
	h2     bool // the connection speaks HTTP/2: frames on stream x.Request.Stream
	notes  func(string)
	damage func(error)
}

// exchangeWire returns the pieces of exchange x in the order (and, but
// for a piece that waits for a later record, the time order) its sides
// sent them. It reads the exchange's records once, holding at most the
// bytes of a chunk whose framing is not known yet.
func exchangeWire(f *formats.File, x *formats.ExchangeInfo, o wireOptions) iter.Seq[piece] {
	return func(yield func(piece) bool) {
		g := &wireGen{f: f, x: x, o: o}
		g.run(yield)
	}
}

type wireGen struct {
	f *formats.File
	x *formats.ExchangeInfo
	o wireOptions

	out  []piece // pieces ready to yield
	body bodyAsm // the response body
	hp   hpackBlock

	// Request direction.
	reqHead    *formats.Request // HTTP/2: HEADERS held until the next record says whether a body follows
	reqChunked bool             // HTTP/1.1 request body in chunked framing (re-chunked per stored piece)
	reqBody    bool             // request body bytes were sent
	reqDone    bool

	// Response direction.
	respHead   *formats.Response // HTTP/2: HEADERS held until the next record
	respSent   bool
	format     frame.Format
	evEnd      int64 // body offset after the last Frame
	reencode   *reencoder
	ended      bool
	streamDone bool // HTTP/2: END_STREAM or RST_STREAM sent for the response
}

func (g *wireGen) emit(t int64, dir formats.Direction, b []byte) {
	if len(b) == 0 {
		return
	}
	g.out = append(g.out, piece{t: t, dir: dir, data: b})
}

func (g *wireGen) run(yield func(piece) bool) {
	g.body.g = g
	g.body.mode = bodyPlain
	stream := g.x.Request.Stream
	if g.o.h2 {
		g.body.mode = bodyH2
		g.body.stream = stream
	}
	for r, err := range g.f.ExchangeRecords(g.x.Request.Exchange).Intact(func(d *formats.DamageError) { g.o.damage(d) }) {
		if err != nil {
			g.o.damage(err)
			break
		}
		g.flushHeads(r)
		g.record(r)
		for _, p := range g.out {
			if !yield(p) {
				return
			}
		}
		g.out = g.out[:0]
	}
	g.flushHeads(nil)
	if !g.ended {
		g.body.run(true, false, nil)
	}
	for _, p := range g.out {
		if !yield(p) {
			return
		}
	}
}

// flushHeads sends the HTTP/2 HEADERS held back, now that the record that
// follows them (next; nil at the end) says whether they end their stream.
func (g *wireGen) flushHeads(next formats.Record) {
	if !g.o.h2 {
		return
	}
	if h := g.reqHead; h != nil {
		g.reqHead = nil
		end := false
		if e, ok := next.(*formats.End); ok && e.Dir == formats.ClientToServer && e.Status == formats.EndComplete && e.Size == 0 {
			end = true
			g.reqDone = true
		}
		g.emit(h.Time, formats.ClientToServer, g.hp.headers(h.Stream, requestFields(h), end))
	}
	if h := g.respHead; h != nil {
		g.respHead = nil
		end := false
		if e, ok := next.(*formats.End); ok && e.Dir == formats.ServerToClient && e.Status == formats.EndComplete && len(e.Tail) == 0 && g.body.pos == 0 && len(e.Trailer) == 0 {
			end = true
			g.streamDone = true
		}
		g.emit(h.Time, formats.ServerToClient, g.hp.headers(g.x.Request.Stream, responseFields(h), end))
	}
}

func (g *wireGen) record(r formats.Record) {
	switch r := r.(type) {
	case *formats.Request:
		if r.Missing {
			return
		}
		if g.o.h2 {
			g.reqHead = r
			return
		}
		g.reqChunked = chunkedHeader(r.Header)
		g.emit(r.Time, formats.ClientToServer, requestHead(r, g.x))
	case *formats.Body:
		if r.Dir == formats.ClientToServer {
			g.requestBody(r)
			return
		}
		if g.format == frame.Unknown {
			g.body.addData(r.Offset, r.Data, r.Time)
			g.body.run(false, false, nil)
		}
	case *formats.Response:
		g.response(r)
	case *formats.Frame:
		g.frameRecord(r)
	case *formats.Chunk:
		if g.reencode == nil {
			g.body.addChunk(*r)
			g.body.run(false, false, nil)
		}
	case *formats.End:
		if r.Dir == formats.ClientToServer {
			g.requestEnd(r)
			return
		}
		g.responseEnd(r)
	}
}

func (g *wireGen) requestBody(r *formats.Body) {
	if g.reqDone || len(r.Data) == 0 {
		return
	}
	g.reqBody = true
	switch {
	case g.o.h2:
		for b := r.Data; len(b) > 0; {
			n := min(len(b), h2MaxFrame)
			g.emit(r.Time, formats.ClientToServer, h2Frame(nil, http2.FrameData, 0, g.x.Request.Stream, b[:n]))
			b = b[n:]
		}
	case g.reqChunked:
		b := fmt.Appendf(nil, "%x\r\n", len(r.Data))
		b = append(append(b, r.Data...), "\r\n"...)
		g.emit(r.Time, formats.ClientToServer, b)
	default:
		g.emit(r.Time, formats.ClientToServer, r.Data)
	}
}

func (g *wireGen) requestEnd(r *formats.End) {
	if g.reqDone {
		return
	}
	g.reqDone = true
	if r.Status != formats.EndComplete {
		return
	}
	switch {
	case g.o.h2:
		g.emit(r.Time, formats.ClientToServer, h2Frame(nil, http2.FrameData, http2.FlagDataEndStream, g.x.Request.Stream, nil))
	case g.reqChunked:
		b := []byte("0\r\n")
		b = appendHeaders(b, r.Trailer)
		g.emit(r.Time, formats.ClientToServer, append(b, "\r\n"...))
	}
}

func (g *wireGen) response(r *formats.Response) {
	if g.respSent && r.Status >= 200 {
		// A repeated final head (a recorder announcing it again) is not
		// sent twice.
		return
	}
	g.format = r.Events
	if r.Status >= 200 || r.Midstream {
		g.respSent = true
	}
	if r.Events != frame.Unknown && r.Encoding != "" && !strings.EqualFold(r.Encoding, "identity") {
		re, err := newReencoder(r.Encoding)
		if err != nil {
			g.o.notes(fmt.Sprintf("exchange %d: %v; its events are sent decoded", g.x.Request.Exchange, err))
		} else {
			g.reencode = re
			g.o.notes(fmt.Sprintf("exchange %d: the watch body is %s-encoded again from its events (the session keeps events decoded); chunk boundaries are one per event", g.x.Request.Exchange, r.Encoding))
		}
	}
	if !g.o.h2 {
		g.body.mode = bodyPlain
		if r.Framing == formats.FramingChunked {
			g.body.mode = bodyChunked
		}
	}
	switch {
	case r.Midstream:
	case g.o.h2:
		g.respHead = r
	default:
		g.emit(r.Time, formats.ServerToClient, g.responseHead(r))
	}
}

func (g *wireGen) frameRecord(r *formats.Frame) {
	if g.reencode != nil {
		b := g.reencode.write(r.Pre, r.Data)
		g.evEnd = r.Offset + int64(len(r.Pre)+len(r.Data))
		g.body.addSynthetic(b, r.Time)
		g.body.run(false, false, nil)
		return
	}
	g.body.addData(r.Offset, r.Pre, r.Time)
	g.body.addData(r.Offset+int64(len(r.Pre)), r.Data, r.Time)
	g.evEnd = r.Offset + int64(len(r.Pre)+len(r.Data))
	g.body.run(false, false, nil)
}

func (g *wireGen) responseEnd(r *formats.End) {
	if g.ended {
		return
	}
	g.ended = true
	if len(r.Tail) > 0 {
		off := g.evEnd
		if g.evEnd == 0 {
			off = max(r.Size-int64(len(r.Tail)), 0)
		}
		if g.reencode != nil {
			g.body.addSynthetic(g.reencode.write(r.Tail, nil), r.Time)
		} else {
			g.body.addData(off, r.Tail, r.Time)
		}
	}
	complete := r.Status == formats.EndComplete
	if g.reencode != nil && complete {
		g.body.addSynthetic(g.reencode.close(), r.Time)
	}
	g.body.run(true, complete, r)
	if g.streamDone || !g.o.h2 {
		return
	}
	switch {
	case complete && len(r.Trailer) > 0:
		g.emit(r.Time, formats.ServerToClient, g.hp.headers(g.x.Request.Stream, fields(r.Trailer), true))
	case complete:
		g.emit(r.Time, formats.ServerToClient, h2Frame(nil, http2.FrameData, http2.FlagDataEndStream, g.x.Request.Stream, nil))
	case r.Status == formats.EndReset:
		dir, code := resetOf(r.Note)
		g.emit(r.Time, dir, h2Frame(nil, http2.FrameRSTStream, 0, g.x.Request.Stream, binary.BigEndian.AppendUint32(nil, uint32(code))))
	}
	g.streamDone = true
}

// resetOf reads who reset an HTTP/2 stream and with which code from an
// End's note ("RST_STREAM CANCEL from the client", "GOAWAY … from the
// server: stream not processed"); CANCEL from the client when it does not
// say.
func resetOf(note string) (formats.Direction, http2.ErrCode) {
	dir, code := formats.ClientToServer, http2.ErrCodeCancel
	if strings.Contains(note, "from the server") {
		dir = formats.ServerToClient
	}
	if strings.HasPrefix(note, "GOAWAY") {
		return formats.ServerToClient, http2.ErrCodeRefusedStream
	}
	if rest, ok := strings.CutPrefix(note, "RST_STREAM "); ok {
		name, _, _ := strings.Cut(rest, " ")
		for c := http2.ErrCode(0); c <= http2.ErrCodeHTTP11Required; c++ {
			if c.String() == name {
				code = c
			}
		}
	}
	return dir, code
}

func chunkedHeader(hs []formats.Header) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Name, "Transfer-Encoding") && strings.Contains(strings.ToLower(h.Value), "chunked") {
			return true
		}
	}
	return false
}

// requestHead is an HTTP/1.1 request head as recorded (a redacted header
// is sent with an empty value). A Content-Length the stored body no
// longer has (a body re-encoded after redaction) is the stored length.
func requestHead(r *formats.Request, x *formats.ExchangeInfo) []byte {
	proto := r.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	b := fmt.Appendf(nil, "%s %s %s\r\n", r.Method, r.Target, proto)
	var size int64 = -1
	if x.RequestEnd != nil && x.RequestEnd.Status == formats.EndComplete {
		size = x.RequestEnd.Size
	}
	b = appendHeadersLength(b, r.Header, size)
	return append(b, "\r\n"...)
}

func (g *wireGen) responseHead(r *formats.Response) []byte {
	proto := r.Proto
	if proto == "" || strings.HasPrefix(proto, "HTTP/2") {
		proto = "HTTP/1.1"
	}
	reason := r.Reason
	if reason == "" {
		reason = http.StatusText(r.Status)
	}
	b := fmt.Appendf(nil, "%s %03d %s\r\n", proto, r.Status, reason)
	var size int64 = -1
	if r.Framing == formats.FramingLength && r.Events == frame.Unknown && g.x.End != nil && g.x.End.Status == formats.EndComplete && r.Status >= 200 {
		size = g.x.BodyBytes
	}
	b = appendHeadersLength(b, r.Header, size)
	return append(b, "\r\n"...)
}

// appendHeadersLength appends header fields; with size ≥ 0, a
// Content-Length that differs from size says size.
func appendHeadersLength(b []byte, hs []formats.Header, size int64) []byte {
	for _, h := range hs {
		v := h.Value
		if size >= 0 && strings.EqualFold(h.Name, "Content-Length") && v != strconv.FormatInt(size, 10) {
			v = strconv.FormatInt(size, 10)
		}
		b = append(append(append(append(b, h.Name...), ": "...), v...), "\r\n"...)
	}
	return b
}

func appendHeaders(b []byte, hs []formats.Header) []byte { return appendHeadersLength(b, hs, -1) }

// requestFields are the HTTP/2 header fields of a request: pseudo-header
// fields first (RFC 9113 §8.3), :method and :path from the request line.
func requestFields(r *formats.Request) []hpack.HeaderField {
	fs := []hpack.HeaderField{{Name: ":method", Value: r.Method}, {Name: ":path", Value: r.Target}}
	for _, h := range r.Header {
		if strings.HasPrefix(h.Name, ":") && h.Name != ":method" && h.Name != ":path" {
			fs = append(fs, hpack.HeaderField{Name: h.Name, Value: h.Value})
		}
	}
	for _, h := range r.Header {
		if !strings.HasPrefix(h.Name, ":") {
			fs = append(fs, hpack.HeaderField{Name: strings.ToLower(h.Name), Value: h.Value})
		}
	}
	return fs
}

func responseFields(r *formats.Response) []hpack.HeaderField {
	fs := []hpack.HeaderField{{Name: ":status", Value: strconv.Itoa(r.Status)}}
	return append(fs, fields(r.Header)...)
}

func fields(hs []formats.Header) []hpack.HeaderField {
	var fs []hpack.HeaderField
	for _, h := range hs {
		if strings.HasPrefix(h.Name, ":") {
			continue
		}
		fs = append(fs, hpack.HeaderField{Name: strings.ToLower(h.Name), Value: h.Value})
	}
	return fs
}

// hpackBlock encodes header blocks without the dynamic table: every field
// a "literal header field without indexing — new name", strings without
// Huffman coding (RFC 7541 §6.2.2, §5.2), so that each block decodes
// alone, whatever order the blocks of a connection are sent in. ("Never
// indexed" literals would tell a recorder the fields are credentials.)
type hpackBlock struct {
	buf []byte
}

// headers returns a HEADERS frame on stream id.
func (h *hpackBlock) headers(id uint32, fs []hpack.HeaderField, endStream bool) []byte {
	b := h.buf[:0]
	for _, f := range fs {
		b = append(b, 0)
		b = appendHpackString(b, f.Name)
		b = appendHpackString(b, f.Value)
	}
	h.buf = b
	var flags http2.Flags
	if endStream {
		flags = http2.FlagHeadersEndStream
	}
	// A block larger than a frame goes on in CONTINUATION frames (RFC
	// 9113 §6.10).
	var out []byte
	typ := http2.FrameHeaders
	for {
		n := min(len(b), h2MaxFrame)
		if n == len(b) {
			flags |= http2.FlagHeadersEndHeaders
		}
		out = h2Frame(out, typ, flags, id, b[:n])
		b = b[n:]
		if len(b) == 0 {
			return out
		}
		typ, flags = http2.FrameContinuation, 0
	}
}

// appendHpackString appends a string literal without Huffman coding: its
// length as an integer with a 7-bit prefix (RFC 7541 §5.1), then its
// bytes.
func appendHpackString(b []byte, s string) []byte {
	n := uint64(len(s))
	if n < 127 {
		b = append(b, byte(n))
	} else {
		b = append(b, 127)
		n -= 127
		for n >= 128 {
			b = append(b, byte(n%128+128))
			n /= 128
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// h2Frame appends an HTTP/2 frame (RFC 9113 §4.1) to dst.
func h2Frame(dst []byte, typ http2.FrameType, flags http2.Flags, stream uint32, payload []byte) []byte {
	n := len(payload)
	dst = append(dst, byte(n>>16), byte(n>>8), byte(n), byte(typ), byte(flags))
	dst = binary.BigEndian.AppendUint32(dst, stream&(1<<31-1))
	return append(dst, payload...)
}

// h2DataHeader is the 9-byte header of a DATA frame of n bytes.
func h2DataHeader(n int64, stream uint32, end bool) []byte {
	var flags http2.Flags
	if end {
		flags = http2.FlagDataEndStream
	}
	b := []byte{byte(n >> 16), byte(n >> 8), byte(n), byte(http2.FrameData), byte(flags)}
	return binary.BigEndian.AppendUint32(b, stream&(1<<31-1))
}

// reencoder content-encodes a watch body again from its decoded events:
// the session keeps events decoded, and the compressed bytes are not
// stored.
type reencoder struct {
	buf bytes.Buffer
	w   interface {
		io.Writer
		Flush() error
		Close() error
	}
}

func newReencoder(enc string) (*reencoder, error) {
	re := &reencoder{}
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "gzip", "x-gzip":
		re.w = gzip.NewWriter(&re.buf)
	case "deflate":
		re.w = zlib.NewWriter(&re.buf)
	default:
		return nil, fmt.Errorf("content encoding %q cannot be re-encoded", enc)
	}
	return re, nil
}

// write encodes the parts and flushes: the bytes that carry them.
func (re *reencoder) write(parts ...[]byte) []byte {
	re.buf.Reset()
	for _, p := range parts {
		re.w.Write(p) // to a bytes.Buffer: no error
	}
	re.w.Flush()
	return bytes.Clone(re.buf.Bytes())
}

func (re *reencoder) close() []byte {
	re.buf.Reset()
	re.w.Close()
	return bytes.Clone(re.buf.Bytes())
}
