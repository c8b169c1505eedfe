package export

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/units"
)

// TextOptions configure Text. The zero value names no file and shows every
// anomaly.
type TextOptions struct {
	// Name is the file's name, shown first.
	Name string
	// Anomalies shows at most this many anomalies; 0 shows all.
	Anomalies int
}

// Text writes what `wtrace inspect` prints of the session f, for people:
// where it was recorded from, each connection (addresses, protocol, TLS,
// how it ended) and each exchange on it (method, path, status, duration,
// bytes, watch events by type, what redaction replaced), a watch's ERROR
// events and longest silence (what inspect --json says in an Exchange's
// errors and longestSilence), and every anomaly. It reads the index, and
// the events of the watches in one pass over the file. Its error is one of
// w, or of reading the file (not damage, which Text shows).
func Text(w io.Writer, f *formats.File, opts TextOptions) error {
	notes, err := readWatchNotes(f)
	if err != nil {
		return err
	}
	t := &textWriter{w: w}
	t.session(f, f.Index(), notes, opts)
	return t.err
}

// textWriter is an io.Writer keeping its first error.
type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) Write(p []byte) (int, error) {
	if t.err != nil {
		return len(p), nil
	}
	_, t.err = t.w.Write(p)
	return len(p), nil
}

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000000")
}

func fmtDur(a, b int64) string {
	if a == 0 || b == 0 || b < a {
		return "-"
	}
	return fmtSpan(time.Duration(b - a))
}

// fmtSpan rounds a duration for people.
func fmtSpan(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.String()
}

func (t *textWriter) session(f *formats.File, idx *formats.Index, notes map[int64]*watchNotes, o TextOptions) {
	w := io.Writer(t)
	m := idx.Meta
	if m == nil {
		m = &formats.Meta{}
	}
	fmt.Fprintf(w, "%s\n", o.Name)
	fmt.Fprintf(w, "  recorded by   %s on %s from %s\n", orDash(m.Tool), orDash(m.Host), orDash(m.Description))
	if m.Redaction != "" {
		fmt.Fprintf(w, "  redaction     %s\n", m.Redaction)
	}
	var first, last int64
	for _, b := range idx.Blocks {
		if b.First != 0 && (first == 0 || b.First < first) {
			first = b.First
		}
		if b.Last > last {
			last = b.Last
		}
	}
	if first != 0 {
		fmt.Fprintf(w, "  capture time  %s → %s (%s)\n",
			time.Unix(0, first).UTC().Format(time.RFC3339Nano), time.Unix(0, last).UTC().Format("15:04:05.000000"), fmtDur(first, last))
	}
	if sum := idx.Summary; sum != nil {
		switch {
		case m.Source == formats.SourceProxy || sum.Packets == 0:
			fmt.Fprintf(w, "  file          closed cleanly; %s recorded", units.Bytes(sum.Bytes))
		default:
			fmt.Fprintf(w, "  file          closed cleanly; %d packets (%s) read", sum.Packets, units.Bytes(sum.Bytes))
		}
		if sum.CaptureXXH64 != "" {
			fmt.Fprintf(w, ", capture xxh64 %s", sum.CaptureXXH64)
		}
		if sum.CaptureSHA256 != "" {
			fmt.Fprintf(w, ", capture sha256 %.16s…", sum.CaptureSHA256)
		}
		fmt.Fprintln(w)
		if sum.Note != "" {
			fmt.Fprintf(w, "  note          %s\n", sum.Note)
		}
	} else {
		fmt.Fprintf(w, "  file          NOT closed cleanly (the recorder was killed or the file was cut): read up to the last intact block\n")
	}
	for _, p := range f.Problems() {
		fmt.Fprintf(w, "  problem       %v\n", p)
	}
	var events int64
	types := map[string]int64{}
	for _, x := range idx.Exchanges {
		events += x.Frames
		for k, v := range x.FrameTypes {
			types[k] += v
		}
	}
	fmt.Fprintf(w, "  contents      %s, %s, %s%s, %s\n\n",
		units.Count(int64(len(idx.Conns)), "connection", "connections"), units.Count(int64(len(idx.Exchanges)), "exchange", "exchanges"),
		units.Count(int64(events), "watch event", "watch events"), typeCounts(types), units.Count(int64(len(idx.Anomalies)), "anomaly", "anomalies"))

	for _, c := range idx.Conns {
		ended := "open at the end of the file"
		if c.End != nil {
			ended = "ended " + c.End.Reason.String() + " at " + fmtTime(c.End.Time)
		}
		fmt.Fprintf(w, "conn %d  %s → %s  %s", c.Conn.ID, c.Conn.Client, c.Conn.Server, c.Conn.Proto)
		if c.Conn.Midstream {
			fmt.Fprint(w, "  (began before the capture)")
		}
		fmt.Fprintf(w, "\n  first packet %s, %s", fmtTime(c.Conn.Time), ended)
		if c.End != nil {
			fmt.Fprintf(w, "; client sent %s, server sent %s", units.Bytes(c.End.ClientBytes), units.Bytes(c.End.ServerBytes))
			if c.End.LostBytes > 0 {
				fmt.Fprintf(w, ", %s not captured", units.Bytes(c.End.LostBytes))
			}
		}
		fmt.Fprintln(w)
		if t := c.TLS; t != nil {
			state := "decrypted"
			if !t.Decrypted {
				state = "NOT decrypted"
				if t.Note != "" {
					state += " (" + t.Note + ")"
				}
			}
			fmt.Fprintf(w, "  tls %s, %s, alpn %s, sni %s: %s\n", tls.VersionName(t.Version), tls.CipherSuiteName(t.Cipher), orDash(t.ALPN), orDash(t.SNI), state)
		}
		for _, id := range c.Exchanges {
			x := f.Exchange(id)
			if x == nil {
				continue
			}
			printExchange(w, x)
			if n := notes[id]; n != nil {
				n.print(w)
			}
		}
		fmt.Fprintln(w)
	}
	if len(idx.Anomalies) > 0 {
		fmt.Fprintf(w, "anomalies (%d):\n", len(idx.Anomalies))
		for i, a := range idx.Anomalies {
			if o.Anomalies > 0 && i >= o.Anomalies {
				fmt.Fprintf(w, "  … %d more (--anomalies 0 shows all)\n", len(idx.Anomalies)-i)
				break
			}
			where := fmt.Sprintf("conn %d", a.Conn)
			if a.Exchange != formats.NoExchange {
				where += fmt.Sprintf(" #%d", a.Exchange)
			}
			fmt.Fprintf(w, "  %s  %-9s %s %s: %s\n", fmtTime(a.Time), a.Kind, where, a.Dir, a.Message)
		}
	}
}

func printExchange(w io.Writer, x *formats.ExchangeInfo) {
	req := "(request not captured)"
	if !x.Request.Missing {
		req = x.Request.Method + " " + x.Request.Target
	}
	status := "no response"
	detail := ""
	if r := x.Response; r != nil {
		if r.Midstream {
			status = "(response head not captured)"
		} else {
			reason := r.Reason
			if reason == "" {
				reason = http.StatusText(r.Status) // HTTP/2 has no reason phrase
			}
			status = fmt.Sprintf("%d %s", r.Status, reason)
		}
		ct := headerOf(r.Header, "Content-Type")
		if enc := r.Encoding; enc != "" {
			ct += "; " + enc
		}
		if ct != "" {
			detail += "  " + ct
		}
	}
	end := "-"
	endNote := ""
	if x.End != nil {
		end = x.End.Status.String()
		endNote = x.End.Note
	}
	start := x.Request.Time
	if start == 0 {
		start = x.First
	}
	endTime := x.Last
	if x.End != nil {
		endTime = x.End.Time
	}
	fmt.Fprintf(w, "  #%-4d %s\n", x.Request.Exchange, clipLine(req, 110))
	fmt.Fprintf(w, "        → %s%s  %s  %s, %s", status, detail, fmtTime(start), fmtDur(start, endTime), units.Bytes(x.BodyBytes))
	if x.Frames > 0 || (x.Response != nil && x.Response.Events != frame.Unknown) {
		fmt.Fprintf(w, ", %d events%s", x.Frames, typeCounts(x.FrameTypes))
	}
	if x.Chunks > 0 {
		fmt.Fprintf(w, ", %d chunks", x.Chunks)
	}
	fmt.Fprintf(w, ", %s", end)
	if endNote != "" {
		fmt.Fprintf(w, " (%s)", endNote)
	}
	if x.Anomalies > 0 {
		fmt.Fprintf(w, ", %d anomalies", x.Anomalies)
	}
	fmt.Fprintln(w)
	printRedactions(w, x)
}

// maxRedactionLines bounds the redaction lines shown per exchange.
const maxRedactionLines = 8

// printRedactions says what redaction replaced in an exchange, and why:
// credential headers, the request-target's query, and the values of each
// body (End.Redactions).
func printRedactions(w io.Writer, x *formats.ExchangeInfo) {
	var lines []string
	for _, h := range []struct {
		dir string
		hs  []formats.Header
	}{{"request", x.Request.Header}, {"response", respHeader(x)}} {
		var names []string
		var n int
		for _, f := range h.hs {
			if f.Redacted {
				names = append(names, f.Name)
				n += f.Len
			}
		}
		if len(names) > 0 {
			lines = append(lines, fmt.Sprintf("%s headers %s (credentials, %d bytes)", h.dir, strings.Join(names, ", "), n))
		}
	}
	for _, e := range []*formats.End{x.RequestEnd, x.End} {
		if e == nil {
			continue
		}
		dir := "request"
		if e.Dir == formats.ServerToClient {
			dir = "response"
		}
		for _, r := range e.Redactions {
			lines = append(lines, dir+" "+describeRedaction(r))
		}
	}
	for i, l := range lines {
		if i == maxRedactionLines {
			fmt.Fprintf(w, "        redacted: … %d more (--json shows all)\n", len(lines)-i)
			break
		}
		fmt.Fprintf(w, "        redacted: %s\n", clipLine(l, 140))
	}
}

func respHeader(x *formats.ExchangeInfo) []formats.Header {
	if x.Response == nil {
		return nil
	}
	return x.Response.Header
}

// describeRedaction says one line of formats.Redaction in words.
func describeRedaction(r formats.Redaction) string {
	var what string
	switch r.Reason {
	case formats.RedactSecretValue:
		what = "Secret values"
	case formats.RedactLastApplied:
		what = "last-applied-configuration annotations"
	case formats.RedactToken:
		what = "tokens"
	case formats.RedactQuery:
		what = "query credentials"
	case formats.RedactUnparsed:
		return fmt.Sprintf("%d bytes replaced, unparsed (fail closed): %s", r.Bytes, r.Fields)
	default:
		what = fmt.Sprintf("reason %d", r.Reason)
	}
	s := fmt.Sprintf("%d %s", r.Count, what)
	if r.Object != "" {
		s += " of " + r.Object
	}
	if r.Fields != "" {
		s += " (" + r.Fields + ")"
	}
	return fmt.Sprintf("%s, %d bytes", s, r.Bytes)
}

// print writes the notes: the ERROR events, then the longest silence.
func (n *watchNotes) print(w io.Writer) {
	for i, e := range n.errors {
		fmt.Fprintf(w, "        ! event %d at %s: ERROR %d %s: %s\n", e.Seq, fmtTime(n.errTimes[i]), e.Code, e.Reason, e.Message)
	}
	if n.to > n.from {
		fmt.Fprintf(w, "        longest silence %s, until %s at %s\n", fmtSpan(time.Duration(n.to-n.from)), n.until, fmtTime(n.to))
	}
}

func headerOf(h []formats.Header, name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

func typeCounts(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(" (")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	b.WriteString(")")
	return b.String()
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
