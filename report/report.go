package report

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"time"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/formats"
)

// Defaults of the Options whose zero value means "the default".
const (
	// DefaultMaxBodyBytes bounds the event and body bytes a page embeds:
	// past it, each exchange keeps its share (what it holds × budget /
	// what the session holds), spread over its time, and the marks of the
	// rest show their metadata only. 16 MiB of JSON events gzip to 1–3
	// MB of page.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMaxBodySize cuts each event or body shown: a click shows its
	// first 64 KiB.
	DefaultMaxBodySize = 64 << 10
	// DefaultStallAfter is how long a watch may send nothing before its
	// silence is marked as a stall.
	DefaultStallAfter = 30 * time.Second
)

// Options configure a report. The zero value embeds at most
// DefaultMaxBodyBytes of events and bodies, each cut at
// DefaultMaxBodySize, marks silences of DefaultStallAfter as stalls, and
// takes the client under test as a replay does: every client of a proxy
// or replay recording, none of a capture.
type Options struct {
	// Title heads the page; "" names the session (or the two sessions).
	Title string
	// Tool names the program that wrote the report ("wtrace v0.5.0").
	Tool string
	// Tested says whether a request made with User-Agent ua on a
	// connection from addr (IP:port) is the client under test's (nil: the
	// default above); TestedRule says so in words for the page
	// ("user-agent=my-operator").
	Tested     func(ua, addr string) bool
	TestedRule string
	// MaxBodyBytes bounds the event and body bytes embedded (0:
	// DefaultMaxBodyBytes); MaxBodySize cuts each one (0:
	// DefaultMaxBodySize).
	MaxBodyBytes int64
	MaxBodySize  int
	// StallAfter: 0 means DefaultStallAfter, negative marks no stall.
	StallAfter time.Duration
}

func (o Options) maxBodyBytes() int64 {
	if o.MaxBodyBytes > 0 {
		return o.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

func (o Options) maxBodySize() int {
	if o.MaxBodySize > 0 {
		return o.MaxBodySize
	}
	return DefaultMaxBodySize
}

func (o Options) stallAfter() time.Duration {
	switch {
	case o.StallAfter < 0:
		return 0
	case o.StallAfter == 0:
		return DefaultStallAfter
	}
	return o.StallAfter
}

// clientRule is the client under test of a session recorded as meta says.
func (o Options) clientRule(meta *formats.Meta) (func(ua, addr string) bool, string) {
	if o.Tested != nil {
		return o.Tested, o.TestedRule
	}
	if meta != nil && (meta.Source == formats.SourceProxy || meta.Source == formats.SourceReplay) {
		return func(string, string) bool { return true }, "every client (a " + meta.Source + " recording)"
	}
	return func(string, string) bool { return false }, "none (a capture: name one with --client)"
}

//go:embed page.html
var pageHead string

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageJS string

// Session writes the report of session f (named name) to w: one HTML
// file that holds everything it shows. It reads f twice in file order
// (export.NewSession for what inspect says, then every record) and writes
// the store's chunks as they fill.
func Session(w io.Writer, f *formats.File, name string, opts Options) error {
	title := opts.Title
	if title == "" {
		title = name
	}
	return writePage(w, title, opts, func(st *store) (*page, error) {
		s, err := newBuilder(f, name, st, opts).build()
		if err != nil {
			return nil, err
		}
		return &page{Kind: "session", Sessions: []*session{s}}, nil
	})
}

// Diff writes the report of a comparison to w: both sessions on one time
// axis (each from its own start, as diff pairs streams by their time
// since their start), every difference of rep marked where it is in each
// and listed, the verdict and its counts at the top. a and b are the
// files rep compared (diff.Files, or diff.Sessions of rep.A and rep.B).
func Diff(w io.Writer, rep *diff.Report, a, b *formats.File, opts Options) error {
	title := opts.Title
	if title == "" {
		title = rep.A + " ↔ " + rep.B
	}
	return writePage(w, title, opts, func(st *store) (*page, error) {
		ba := newBuilder(a, rep.A, st, opts)
		sa, err := ba.build()
		if err != nil {
			return nil, err
		}
		bb := newBuilder(b, rep.B, st, opts)
		sb, err := bb.build()
		if err != nil {
			return nil, err
		}
		sa.Label, sb.Label = "A", "B"
		return &page{Kind: "diff", Sessions: []*session{sa, sb}, Diff: newDiffModel(rep, ba, bb, st)}, nil
	})
}

// DiffFiles writes the report of rep, reading the sessions it names.
func DiffFiles(w io.Writer, rep *diff.Report, opts Options) error {
	a, err := formats.Open(rep.A, formats.ReaderOptions{})
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer a.Close()
	b, err := formats.Open(rep.B, formats.ReaderOptions{})
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer b.Close()
	return Diff(w, rep, a, b, opts)
}

// writePage writes the page: its head and markup, the store's chunks as
// build fills them, then the model and the script.
func writePage(w io.Writer, title string, opts Options, build func(*store) (*page, error)) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>%s</title>\n<style>\n%s</style>\n</head>\n", html.EscapeString(title), pageCSS)
	io.WriteString(bw, pageHead)
	st := newStore(bw)
	p, err := build(st)
	if err != nil {
		return err
	}
	st.flush()
	if st.err != nil {
		return fmt.Errorf("report: %w", st.err)
	}
	p.Title, p.Tool = title, opts.Tool
	p.Items, p.Chunks = st.index(), st.chunk
	p.MaxBody = opts.maxBodySize()
	p.StallSecs = opts.stallAfter().Seconds()
	p.Embedded, p.Left = st.in, st.left
	io.WriteString(bw, "<script type=\"application/json\" id=\"model\">")
	enc := json.NewEncoder(bw) // escapes <, > and &: nothing ends the element early
	if err := enc.Encode(p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	io.WriteString(bw, "</script>\n<script>\n")
	io.WriteString(bw, pageJS)
	io.WriteString(bw, "</script>\n</body></html>\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
