package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

type inspectOptions struct {
	json      bool
	anomalies int
}

func newInspectCmd(s streams) *cobra.Command {
	o := &inspectOptions{}
	c := &cobra.Command{
		Use:   "inspect SESSION.wt",
		Short: "Summarise a session: connections, exchanges, events, anomalies",
		Long: `Inspect prints what a session holds: where it was recorded from, each
connection (addresses, protocol, TLS, how it ended) and each exchange on it
(method, path, status, duration, bytes, watch events by type), and every
anomaly: bytes the capture lost, streams captured from their middle, bodies
the capture cut, malformed framing. It reads only the index when the file has
one.`,
		Example: `  wtrace inspect session.wt
  wtrace inspect --json session.wt | jq '.exchanges[] | select(.events > 0) | .request.target'`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			return runInspect(s, args[0], o)
		},
	}
	c.Flags().BoolVar(&o.json, "json", false, "print the session index as JSON instead (the schema of docs/SCHEMA.md)")
	c.Flags().IntVar(&o.anomalies, "anomalies", 50, "show at most `n` anomalies (0: all)")
	return c
}

func runInspect(s streams, path string, o *inspectOptions) error {
	f, err := openSession(path)
	if err != nil {
		return err
	}
	defer f.Close()
	idx := f.Index()
	if o.json {
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(export.NewSession(f))
	}
	w := bufio.NewWriter(s.out)
	defer w.Flush()
	printInspect(w, path, f, idx, o)
	return nil
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

func printInspect(w io.Writer, path string, f *formats.File, idx *formats.Index, o *inspectOptions) {
	m := idx.Meta
	if m == nil {
		m = &formats.Meta{}
	}
	fmt.Fprintf(w, "%s\n", path)
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
			fmt.Fprintf(w, "  file          closed cleanly; %s recorded", humanBytes(sum.Bytes))
		default:
			fmt.Fprintf(w, "  file          closed cleanly; %d packets (%s) read", sum.Packets, humanBytes(sum.Bytes))
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
		count(int64(len(idx.Conns)), "connection", "connections"), count(int64(len(idx.Exchanges)), "exchange", "exchanges"),
		count(int64(events), "watch event", "watch events"), typeCounts(types), count(int64(len(idx.Anomalies)), "anomaly", "anomalies"))

	notes := allWatchNotes(f, idx)
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
			fmt.Fprintf(w, "; client sent %s, server sent %s", humanBytes(c.End.ClientBytes), humanBytes(c.End.ServerBytes))
			if c.End.LostBytes > 0 {
				fmt.Fprintf(w, ", %s not captured", humanBytes(c.End.LostBytes))
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
			switch n := notes[id]; {
			case n != nil:
				n.print(w)
			case x.Frames > 0:
				printWatch(w, f, x)
			}
		}
		fmt.Fprintln(w)
	}
	if len(idx.Anomalies) > 0 {
		fmt.Fprintf(w, "anomalies (%d):\n", len(idx.Anomalies))
		for i, a := range idx.Anomalies {
			if o.anomalies > 0 && i >= o.anomalies {
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
	fmt.Fprintf(w, "        → %s%s  %s  %s, %s", status, detail, fmtTime(start), fmtDur(start, endTime), humanBytes(x.BodyBytes))
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

// watchNotes is what inspect says of a watch exchange's events: the
// Status of each ERROR event (a 410 Gone is what an SRE looks for) and the
// longest silence of the stream — from the response head to the first
// event, between events, or from the last event to the end.
type watchNotes struct {
	x         *formats.ExchangeInfo
	format    frame.Format
	prev      int64
	gap       int64
	gapEnd    int64
	gapBefore string
	errors    []string
}

func newWatchNotes(x *formats.ExchangeInfo) *watchNotes {
	n := &watchNotes{x: x, format: frame.Unknown, gapBefore: "the first event"}
	if x.Response != nil {
		n.format = x.Response.Events
		n.prev = x.Response.Time
	}
	return n
}

// note records t if it ends the longest silence so far; what names what
// came then (called only in that case).
func (n *watchNotes) note(t int64, what func() string) {
	if n.prev != 0 && t-n.prev > n.gap {
		n.gap, n.gapEnd, n.gapBefore = t-n.prev, t, what()
	}
	n.prev = t
}

// frame takes the exchange's next event.
func (n *watchNotes) frame(fr *formats.Frame) {
	n.note(fr.Time, func() string { return eventName(n.format, fr) })
	if n.x.FrameTypes["ERROR"] == 0 {
		return
	}
	m, err := frame.Peek(n.format, fr.Data)
	if err != nil || m.Type != "ERROR" {
		return
	}
	n.errors = append(n.errors, fmt.Sprintf("        ! event %d at %s: ERROR %d %s: %s\n", fr.Seq, fmtTime(fr.Time), m.Code, m.Reason, m.Message))
}

// print ends the notes at the end of the stream and writes them.
func (n *watchNotes) print(w io.Writer) {
	for _, e := range n.errors {
		io.WriteString(w, e)
	}
	if n.x.End != nil {
		n.note(n.x.End.Time, func() string { return "the end of the stream" })
	}
	if n.gap > 0 {
		fmt.Fprintf(w, "        longest silence %s, until %s at %s\n", fmtSpan(time.Duration(n.gap)), n.gapBefore, fmtTime(n.gapEnd))
	}
}

// printWatch reads one watch exchange's events (up to damage) and prints
// its notes.
func printWatch(w io.Writer, f *formats.File, x *formats.ExchangeInfo) {
	n := newWatchNotes(x)
	for r, err := range f.ExchangeRecords(x.Request.Exchange).All() {
		if err != nil {
			return
		}
		if fr, ok := r.(*formats.Frame); ok {
			n.frame(fr)
		}
	}
	n.print(w)
}

// allWatchNotes reads the whole file once for the notes of every watch
// exchange: reading each exchange on its own decompresses every block as
// many times as exchanges run through it (minutes for a long recording of
// many watches). nil if the file is damaged: then each exchange is read
// on its own, up to the damage, as printWatch does.
func allWatchNotes(f *formats.File, idx *formats.Index) map[int64]*watchNotes {
	notes := map[int64]*watchNotes{}
	for i := range idx.Exchanges {
		if x := &idx.Exchanges[i]; x.Frames > 0 {
			notes[x.Request.Exchange] = newWatchNotes(x)
		}
	}
	if len(notes) == 0 {
		return notes
	}
	for r, err := range f.Records().All() {
		if err != nil {
			return nil
		}
		if fr, ok := r.(*formats.Frame); ok {
			if n := notes[fr.Exchange]; n != nil {
				n.frame(fr)
			}
		}
	}
	return notes
}

// eventName names an event for a reader: "event 3 (MODIFIED Table
// demo/web-1)" — a Table (kubectl get -w) by its row's object, as
// frame.Peek reads it.
func eventName(format frame.Format, fr *formats.Frame) string {
	s := fmt.Sprintf("event %d", fr.Seq)
	m, err := frame.Peek(format, fr.Data)
	if err != nil || m.Type == "" {
		return s
	}
	obj := m.Name
	if m.Namespace != "" {
		obj = m.Namespace + "/" + m.Name
	}
	return strings.TrimSpace(fmt.Sprintf("%s (%s %s %s", s, m.Type, m.Kind, obj)) + ")"
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
