package capture

// The HTTP/1.1 message head: its limits, how its end is found, how it is
// parsed (RFC 9112 §2-§6), and how a head's start is recognised.

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wtrace/wtrace/capture/redact"
	"github.com/wtrace/wtrace/formats"
)

// Limits of the HTTP/1.1 parser.
const (
	// MaxHeadSize bounds a request or response head (start line and header
	// fields), like net/http's DefaultMaxHeaderBytes.
	MaxHeadSize = 1 << 20
	// maxHeaderFields bounds the number of header fields of one message.
	maxHeaderFields = 1024
)

// h1Msg is a parsed HTTP/1.1 message head (RFC 9112 §2.1).
type h1Msg struct {
	request bool
	method  string
	target  string
	proto   string
	status  int
	reason  string
	header  []formats.Header

	chunked bool // Transfer-Encoding's final coding is chunked
	// teCoding: the transfer codings besides chunked (and identity), in
	// the order applied ("gzip"); "" if none.
	teCoding  string
	hasTE     bool
	length    int64 // Content-Length, -1 if absent
	badLength bool  // Content-Length present but invalid or conflicting
	upgrade   string
}

var (
	errHeadTooLarge = fmt.Errorf("message head larger than %d bytes", MaxHeadSize)
	errNoHeadEnd    = errors.New("no end of head yet")
)

// headEnd returns the length of the head at the start of b (through the
// empty line), or -1 if b does not hold a complete head yet. It accepts a
// bare LF as line terminator (RFC 9112 §2.2 allows recipients to).
// from is where to resume scanning.
func headEnd(b []byte, from int) int {
	for i := max(from, 0); i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		// An empty line: "\n" or "\r\n" right after the previous LF.
		if i < len(b) && b[i] == '\n' {
			return i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2
		}
	}
	return -1
}

// parseHead parses a complete message head. Credentials are redacted here,
// so header values never leave the parser unredacted.
func parseHead(b []byte, request bool) (*h1Msg, error) {
	m := &h1Msg{request: request, length: -1}
	lines := splitLines(b)
	if len(lines) == 0 {
		return nil, errors.New("empty message head")
	}
	if err := m.startLine(lines[0]); err != nil {
		return nil, err
	}
	var lengths []string
	for _, line := range lines[1:] {
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// obs-fold (RFC 9112 §5.2): replace with SP and join.
			if len(m.header) == 0 {
				return nil, errors.New("header continuation line before any field")
			}
			h := &m.header[len(m.header)-1]
			if h.Redacted {
				h.Len += 1 + len(strings.TrimSpace(line))
			} else {
				h.Value += " " + strings.TrimSpace(line)
			}
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			// The line is not quoted: it may be a credential without its ':'.
			return nil, fmt.Errorf("bad header field (%d bytes, no ':' or a bad name) after %d fields", len(line), len(m.header))
		}
		if len(m.header) >= maxHeaderFields {
			return nil, fmt.Errorf("more than %d header fields", maxHeaderFields)
		}
		value = strings.Trim(value, " \t")
		if m.framingField(name, value) {
			lengths = append(lengths, value)
		}
		m.header = append(m.header, redact.Header(name, value))
	}
	m.setLength(lengths)
	return m, nil
}

// startLine parses the request line (RFC 9112 §3) or the status line
// (§4) of the head.
func (m *h1Msg) startLine(start string) error {
	if m.request {
		// request-line = method SP request-target SP HTTP-version
		method, rest, ok1 := strings.Cut(start, " ")
		target, proto, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || !validMethod(method) || target == "" || !strings.HasPrefix(proto, "HTTP/1.") {
			return fmt.Errorf("bad request line %q", clip(redact.Target(start, nil)))
		}
		m.method, m.target, m.proto = method, target, proto
		return nil
	}
	// status-line = HTTP-version SP status-code SP [ reason-phrase ]
	proto, rest, ok := strings.Cut(start, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") || len(rest) < 3 {
		return fmt.Errorf("bad status line %q", clip(start))
	}
	code, err := strconv.Atoi(rest[:3])
	if err != nil || code < 100 || code > 999 || (len(rest) > 3 && rest[3] != ' ') {
		return fmt.Errorf("bad status line %q", clip(start))
	}
	m.proto, m.status = proto, code
	if len(rest) > 4 {
		m.reason = rest[4:]
	}
	return nil
}

// framingField notes the header fields that frame the body or switch the
// protocol; it reports a Content-Length field, whose values setLength
// reads once all are known.
func (m *h1Msg) framingField(name, value string) (contentLength bool) {
	switch strings.ToLower(name) {
	case "transfer-encoding":
		// Repeated fields are one list (RFC 9110 §5.3); the last coding
		// frames the body (RFC 9112 §6.3).
		m.hasTE = true
		for c := range strings.SplitSeq(value, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			m.chunked = c == "chunked"
			if c != "chunked" && c != "identity" && c != "" {
				m.teCoding = joinCoding(m.teCoding, c)
			}
		}
	case "content-length":
		return true
	case "upgrade":
		m.upgrade = value
	}
	return false
}

// setLength reads the Content-Length fields (RFC 9110 §8.6): a list of
// identical values is the value; anything else makes the length bad.
func (m *h1Msg) setLength(lengths []string) {
	for _, l := range lengths {
		for _, v := range strings.Split(l, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 || (m.length >= 0 && n != m.length) {
				m.badLength = true
				continue
			}
			m.length = n
		}
	}
	if m.badLength {
		m.length = -1
	}
}

// joinCoding appends coding c to the list of codings a.
func joinCoding(a, c string) string {
	if a == "" {
		return c
	}
	return a + ", " + c
}

func splitLines(b []byte) []string {
	s := string(b)
	var lines []string
	for len(s) > 0 {
		line, rest, _ := strings.Cut(s, "\n")
		lines = append(lines, strings.TrimSuffix(line, "\r"))
		s = rest
	}
	return lines
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// validMethod reports whether s is an RFC 9110 token made of upper-case
// letters (every registered method is).
func validMethod(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

var knownMethods = []string{"GET ", "POST ", "PUT ", "PATCH ", "DELETE ", "HEAD ", "OPTIONS ", "CONNECT ", "TRACE "}

// looksLikeRequest reports whether b starts with a request line of a known
// method (or could, if b is still short).
func looksLikeRequest(b []byte) bool {
	for _, m := range knownMethods {
		if len(b) >= len(m) {
			if string(b[:len(m)]) == m {
				return true
			}
		}
	}
	return false
}

// looksLikeResponse reports whether b starts with an HTTP/1.x status line.
func looksLikeResponse(b []byte) bool {
	return len(b) >= 9 && string(b[:7]) == "HTTP/1." && b[8] == ' '
}

// findMessageStart returns the offset of the first line in b that starts a
// request (or response) head, or -1.
func findMessageStart(b []byte, request bool) int {
	for i := 0; i < len(b); {
		if request && looksLikeRequest(b[i:]) || !request && looksLikeResponse(b[i:]) {
			return i
		}
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
	}
	return -1
}
