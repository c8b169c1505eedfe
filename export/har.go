package export

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// HAROptions configure HAR. The zero value is ready to use.
type HAROptions struct {
	// Version is the creator version the HAR names (wtrace's); "" means
	// "devel".
	Version string
}

// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/), the members
// wtrace fills. Members starting with "_" are wtrace's own, as the spec
// allows.
type (
	harEntry struct {
		StartedDateTime string      `json:"startedDateTime"`
		Time            float64     `json:"time"`
		Request         harRequest  `json:"request"`
		Response        harResponse `json:"response"`
		Cache           struct{}    `json:"cache"`
		Timings         harTimings  `json:"timings"`
		ServerIPAddress string      `json:"serverIPAddress,omitempty"`
		Connection      string      `json:"connection,omitempty"`
		Comment         string      `json:"comment,omitempty"`
		Exchange        int64       `json:"_exchange"`
		Conn            string      `json:"_conn,omitempty"`
		Events          int64       `json:"_events,omitempty"`
		EventFormat     string      `json:"_eventFormat,omitempty"`
		End             string      `json:"_end,omitempty"`
	}
	harRequest struct {
		Method      string       `json:"method"`
		URL         string       `json:"url"`
		HTTPVersion string       `json:"httpVersion"`
		Cookies     []struct{}   `json:"cookies"`
		Headers     []harNV      `json:"headers"`
		QueryString []harNV      `json:"queryString"`
		PostData    *harPostData `json:"postData,omitempty"`
		HeadersSize int          `json:"headersSize"`
		BodySize    int64        `json:"bodySize"`
	}
	harPostData struct {
		MimeType string `json:"mimeType"`
		Text     string `json:"text"`
		Encoding string `json:"_encoding,omitempty"`
	}
	harResponse struct {
		Status      int        `json:"status"`
		StatusText  string     `json:"statusText"`
		HTTPVersion string     `json:"httpVersion"`
		Cookies     []struct{} `json:"cookies"`
		Headers     []harNV    `json:"headers"`
		Content     harContent `json:"content"`
		RedirectURL string     `json:"redirectURL"`
		HeadersSize int        `json:"headersSize"`
		BodySize    int64      `json:"bodySize"`
		Comment     string     `json:"comment,omitempty"`
	}
	harContent struct {
		Size        int64  `json:"size"`
		Compression int64  `json:"compression,omitempty"`
		MimeType    string `json:"mimeType"`
		Text        string `json:"text"`
		Encoding    string `json:"encoding,omitempty"`
		Comment     string `json:"comment,omitempty"`
	}
	harNV struct {
		Name    string `json:"name"`
		Value   string `json:"value"`
		Comment string `json:"comment,omitempty"`
	}
	harTimings struct {
		Blocked float64 `json:"blocked"`
		DNS     float64 `json:"dns"`
		Connect float64 `json:"connect"`
		Send    float64 `json:"send"`
		Wait    float64 `json:"wait"`
		Receive float64 `json:"receive"`
		SSL     float64 `json:"ssl"`
	}
)

// Placeholders for the bodies, streamed in where they stand in an entry's
// JSON.
const (
	contentMark  = "\x00wtrace-content\x00"
	postDataMark = "\x00wtrace-postdata\x00"
)

// HAR writes the session f as a HAR 1.2 log: one entry per exchange, in
// the order exchanges began, with the request and response as recorded
// (a redacted header has an empty value and a comment saying so), the
// body as the session holds it — a watch body as recorded, its events as
// they came — in content.text (decoded from its Content-Encoding, as HAR
// wants it; base64 when it is not UTF-8 text) and timings from the
// recorded times: send (the request), wait (until the response head),
// receive (until the response ended). Members starting with "_" are
// wtrace's: the exchange number, connection, events and how the response
// ended.
//
// Bodies are streamed: memory is the index and one block, however long a
// watch ran. Each body is read twice (once to learn whether it is text
// and its decoded size). Damage is skipped and listed in the Result.
func HAR(w io.Writer, f *formats.File, opts HAROptions) (Result, error) {
	h := &harWriter{f: f, w: bufio.NewWriterSize(w, 64<<10)}
	version := opts.Version
	if version == "" {
		version = "devel"
	}
	idx := f.Index()
	creator, _ := json.Marshal(map[string]string{"name": "wtrace", "version": version})
	fmt.Fprintf(h.w, `{"log":{"version":"1.2","creator":%s`, creator)
	var comment []string
	if m := idx.Meta; m != nil && m.Description != "" {
		comment = append(comment, "recorded by "+m.Tool+" from "+m.Description)
	}
	if KeepsSecrets(f) {
		comment = append(comment, keptSecrets)
	}
	if len(comment) > 0 {
		c, _ := json.Marshal(strings.Join(comment, ". "))
		fmt.Fprintf(h.w, `,"comment":%s`, c)
	}
	h.w.WriteString(`,"entries":[`)
	conns := map[uint64]*formats.ConnInfo{}
	for i := range idx.Conns {
		conns[idx.Conns[i].Conn.ID] = &idx.Conns[i]
	}
	for i := range idx.Exchanges {
		if i > 0 {
			h.w.WriteString(",\n")
		} else {
			h.w.WriteString("\n")
		}
		if err := h.entry(&idx.Exchanges[i], conns[idx.Exchanges[i].Request.Conn]); err != nil {
			return h.res, err
		}
	}
	h.w.WriteString("\n]}}\n")
	h.dmg.AddFound(f)
	h.res.Damage = h.dmg.Errors()
	return h.res, h.w.Flush()
}

// keptSecrets is what an export of a session that kept Secret values says
// of itself.
const keptSecrets = "Secret values and tokens are kept as captured (recorded with --keep-secrets; credentials in headers never are): treat this file as a secret"

// KeepsSecrets reports whether the session f holds Secret values and
// tokens as captured (recorded with --keep-secrets, or merged from such a
// recording): so does every export of it, which says so (HAR: the log's
// comment; JSONL: the meta line's redaction).
func KeepsSecrets(f *formats.File) bool {
	m := f.Index().Meta
	return m != nil && m.Redaction == formats.RedactionHeadersOnly
}

type harWriter struct {
	f   *formats.File
	w   *bufio.Writer
	res Result
	dmg formats.Damages
	err error // of reading the file (not damage)
}

func (h *harWriter) damage(err error) {
	var de *formats.DamageError
	if !errors.As(err, &de) {
		if h.err == nil {
			h.err = err
		}
		return
	}
	h.dmg.Add(de)
}

func ms(ns int64) float64 { return float64(max(ns, 0)) / 1e6 }

func (h *harWriter) entry(x *formats.ExchangeInfo, c *formats.ConnInfo) error {
	r := &x.Request
	e := harEntry{Exchange: r.Exchange, Events: x.Frames}
	start := startTime(x)
	e.StartedDateTime = Time(start)
	if start == 0 {
		e.StartedDateTime = Time(1) // HAR requires a date; the session has none
	}
	reqEnd, respStart, respEnd := start, start, x.Last
	if x.RequestEnd != nil && x.RequestEnd.Time >= start {
		reqEnd = x.RequestEnd.Time
	}
	respStart = reqEnd
	if x.Response != nil && x.Response.Time >= reqEnd {
		respStart = x.Response.Time
	}
	if x.End != nil {
		respEnd = x.End.Time
		e.End = name(x.End.Status.String(), uint8(x.End.Status))
		if x.End.Note != "" {
			e.End += ": " + x.End.Note
		}
	}
	respEnd = max(respEnd, respStart)
	e.Timings = harTimings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1,
		Send: ms(reqEnd - start), Wait: ms(respStart - reqEnd), Receive: ms(respEnd - respStart)}
	e.Time = e.Timings.Send + e.Timings.Wait + e.Timings.Receive

	scheme, host := "http", ""
	if c != nil {
		e.Conn = connName(&c.Conn)
		e.Connection = fmt.Sprint(c.Conn.ID)
		if c.TLS != nil {
			scheme = "https"
		}
		host = c.Conn.Server
		if i := strings.LastIndexByte(host, ':'); i > 0 {
			e.ServerIPAddress = strings.Trim(host[:i], "[]")
		}
	}
	for _, hd := range r.Header {
		switch strings.ToLower(hd.Name) {
		case "host", ":authority":
			if hd.Value != "" {
				host = hd.Value
			}
		case ":scheme":
			scheme = hd.Value
		}
	}
	e.Request = harRequest{Method: r.Method, HTTPVersion: r.Proto, Cookies: []struct{}{}, Headers: harHeaders(r.Header),
		QueryString: []harNV{}, HeadersSize: -1}
	if r.Missing {
		e.Comment = "the request was not captured"
	} else {
		e.Request.URL = r.Target
		if strings.HasPrefix(r.Target, "/") {
			e.Request.URL = scheme + "://" + host + r.Target
		}
		e.Request.QueryString = query(r.Target)
	}
	var reqBody int64
	if x.RequestEnd != nil {
		reqBody = x.RequestEnd.Size
	}
	e.Request.BodySize = reqBody
	if reqBody > 0 {
		e.Request.PostData = &harPostData{MimeType: headerValue(r.Header, "Content-Type"), Text: postDataMark}
	}

	resp := &e.Response
	resp.Cookies, resp.Headers, resp.HeadersSize, resp.BodySize = []struct{}{}, []harNV{}, -1, -1
	resp.Content.Text = contentMark
	var enc string
	if p := x.Response; p != nil {
		resp.Status, resp.StatusText, resp.HTTPVersion = p.Status, p.Reason, p.Proto
		resp.Headers = harHeaders(p.Header)
		resp.Content.MimeType = headerValue(p.Header, "Content-Type")
		resp.RedirectURL = headerValue(p.Header, "Location")
		if p.Events != frame.Unknown {
			e.EventFormat = p.Events.String()
		} else {
			enc = strings.ToLower(strings.TrimSpace(p.Encoding))
		}
		if p.Midstream {
			resp.Comment = "the response head was not captured"
		}
		if p.Events == frame.Unknown || p.Encoding == "" {
			resp.BodySize = x.BodyBytes
		}
	} else {
		resp.Comment = "no response was captured"
	}

	// The bodies: first learn what they are, then write the entry.
	var post bodyKind
	if reqBody > 0 {
		post = h.inspectBody(x, formats.ClientToServer, "")
	}
	content := h.inspectBody(x, formats.ServerToClient, enc)
	if h.err != nil {
		return h.err
	}
	resp.Content.Size = content.size
	if content.decoded && resp.BodySize >= 0 {
		resp.Content.Compression = content.size - resp.BodySize
	}
	if !content.text {
		resp.Content.Encoding = "base64"
	}
	if content.note != "" {
		resp.Content.Comment = content.note
	}
	if e.Request.PostData != nil && !post.text {
		e.Request.PostData.Encoding = "base64"
	}
	b, err := json.Marshal(&e)
	if err != nil {
		return err
	}
	for len(b) > 0 {
		i, mark := nextMark(b)
		if i < 0 {
			h.w.Write(b)
			break
		}
		h.w.Write(b[:i])
		if mark == postDataMark {
			h.writeBody(x, formats.ClientToServer, post)
		} else {
			h.writeBody(x, formats.ServerToClient, content)
		}
		b = b[i+len(markJSON(mark)):]
	}
	return h.err
}

func markJSON(m string) []byte {
	b, _ := json.Marshal(m)
	return b
}

// nextMark finds the first body placeholder in b.
func nextMark(b []byte) (int, string) {
	i, mark := -1, ""
	for _, m := range []string{contentMark, postDataMark} {
		if j := bytes.Index(b, markJSON(m)); j >= 0 && (i < 0 || j < i) {
			i, mark = j, m
		}
	}
	return i, mark
}

func headerValue(hs []formats.Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

func harHeaders(hs []formats.Header) []harNV {
	out := make([]harNV, 0, len(hs))
	for _, h := range hs {
		nv := harNV{Name: h.Name, Value: h.Value}
		if h.Redacted {
			nv.Comment = fmt.Sprintf("redacted by wtrace: the value (%d bytes) is not stored", h.Len)
		}
		out = append(out, nv)
	}
	return out
}

// query splits a request-target's query into its pairs, in order.
func query(target string) []harNV {
	out := []harNV{}
	_, q, ok := strings.Cut(target, "?")
	if !ok || q == "" {
		return out
	}
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		out = append(out, harNV{Name: k, Value: v})
	}
	return out
}

// bodyKind is what the first reading of a body found.
type bodyKind struct {
	size    int64  // bytes of the text written (decoded when decoded)
	text    bool   // valid UTF-8: written as a JSON string, else base64
	decoded bool   // decoded from its Content-Encoding
	enc     string // the Content-Encoding to decode ("" none)
	note    string
}

// bodyPieces returns the stored bytes of one direction of an exchange's
// body, in order: Body records, or for a watch its events (each Frame's
// Pre and Data) and the End's Tail.
func (h *harWriter) bodyPieces(x *formats.ExchangeInfo, dir formats.Direction) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for r, err := range h.f.ExchangeRecords(x.Request.Exchange).Intact(func(d *formats.DamageError) { h.damage(d) }) {
			if err != nil {
				h.damage(err)
				return
			}
			switch r := r.(type) {
			case *formats.Body:
				if r.Dir == dir && !yield(r.Data) {
					return
				}
			case *formats.Frame:
				if dir == formats.ServerToClient && (!yield(r.Pre) || !yield(r.Data)) {
					return
				}
			case *formats.End:
				if r.Dir == dir && dir == formats.ServerToClient && len(r.Tail) > 0 && !yield(r.Tail) {
					return
				}
			}
		}
	}
}

// pieceReader reads a sequence of byte slices.
type pieceReader struct {
	next func() ([]byte, bool)
	cur  []byte
}

func (r *pieceReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		b, ok := r.next()
		if !ok {
			return 0, io.EOF
		}
		r.cur = b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// reader returns the body's bytes, decoded from enc when enc is set.
func (h *harWriter) reader(x *formats.ExchangeInfo, dir formats.Direction, enc string) (io.Reader, func(), error) {
	next, stop := iter.Pull(h.bodyPieces(x, dir))
	var r io.Reader = &pieceReader{next: next}
	switch enc {
	case "":
		return r, stop, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			stop()
			return nil, nil, err
		}
		return zr, stop, nil
	case "deflate":
		zr, err := zlib.NewReader(r)
		if err != nil {
			stop()
			return nil, nil, err
		}
		return zr, func() { zr.Close(); stop() }, nil
	}
	stop()
	return nil, nil, fmt.Errorf("content encoding %q is not decoded by wtrace", enc)
}

// inspectBody reads a body once: its size and whether it is UTF-8 text,
// decoded from enc if enc is set and the body decodes (else as stored,
// with a note).
func (h *harWriter) inspectBody(x *formats.ExchangeInfo, dir formats.Direction, enc string) bodyKind {
	k := bodyKind{text: true}
	if enc != "" && enc != "identity" {
		r, stop, err := h.reader(x, dir, enc)
		if err == nil {
			k.enc, k.decoded = enc, true
			k.size, k.text, err = scanText(r)
			stop()
		}
		if err == nil {
			return k
		}
		k = bodyKind{text: true, note: fmt.Sprintf("the body is as stored, %s-encoded: decoding it failed: %v", enc, err)}
	}
	r, stop, _ := h.reader(x, dir, "")
	k.size, k.text, _ = scanText(r)
	stop()
	if k.note != "" {
		k.text = false
	}
	return k
}

// scanText counts r's bytes and checks they are UTF-8.
func scanText(r io.Reader) (size int64, text bool, err error) {
	var v utf8Check
	buf := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(buf)
		size += int64(n)
		v.write(buf[:n])
		if rerr == io.EOF {
			return size, v.valid(), nil
		}
		if rerr != nil {
			return size, false, rerr
		}
	}
}

// utf8Check validates UTF-8 written in pieces split anywhere.
type utf8Check struct {
	carry []byte
	bad   bool
}

func (v *utf8Check) write(p []byte) {
	if v.bad {
		return
	}
	if len(v.carry) > 0 {
		need := min(utf8.UTFMax-len(v.carry), len(p))
		b := append(append([]byte{}, v.carry...), p[:need]...)
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(b) && need == len(p) {
				v.carry = b
				return
			}
			v.bad = true
			return
		}
		p = p[size-len(v.carry):]
		v.carry = v.carry[:0]
	}
	for len(p) > 0 {
		if p[0] < utf8.RuneSelf {
			p = p[1:]
			continue
		}
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(p) {
				v.carry = append(v.carry[:0], p...)
				return
			}
			v.bad = true
			return
		}
		p = p[size:]
	}
}

func (v *utf8Check) valid() bool { return !v.bad && len(v.carry) == 0 }

// writeBody streams the body as a JSON string: the text, or base64.
func (h *harWriter) writeBody(x *formats.ExchangeInfo, dir formats.Direction, k bodyKind) {
	r, stop, err := h.reader(x, dir, k.enc)
	if err != nil {
		h.w.WriteString(`""`)
		return
	}
	defer stop()
	h.w.WriteByte('"')
	if k.text {
		_, err = io.Copy(jsonStringWriter{h.w}, r)
	} else {
		enc := base64.NewEncoder(base64.StdEncoding, h.w)
		_, err = io.Copy(enc, r)
		enc.Close()
	}
	if err != nil && h.err == nil {
		h.err = fmt.Errorf("export: exchange %d: body changed between two readings: %w", x.Request.Exchange, err)
	}
	h.w.WriteByte('"')
}

// jsonStringWriter writes UTF-8 text escaped for the inside of a JSON
// string (RFC 8259 §7). Bytes of multi-byte characters pass as they are,
// so text may be split anywhere.
type jsonStringWriter struct{ w *bufio.Writer }

const hexDigits = "0123456789abcdef"

func (j jsonStringWriter) Write(p []byte) (int, error) {
	start := 0
	for i, c := range p {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		j.w.Write(p[start:i])
		switch c {
		case '"', '\\':
			j.w.WriteByte('\\')
			j.w.WriteByte(c)
		case '\n':
			j.w.WriteString(`\n`)
		case '\r':
			j.w.WriteString(`\r`)
		case '\t':
			j.w.WriteString(`\t`)
		default:
			j.w.WriteString(`\u00`)
			j.w.WriteByte(hexDigits[c>>4])
			j.w.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	j.w.Write(p[start:])
	return len(p), nil
}
