package redact

import (
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// Limits of a Report: it summarises, it does not list every value.
const (
	// maxReportEntries bounds the lines of a Report (one per reason and
	// object); further objects are counted in one last line.
	maxReportEntries = 64
	// maxReportFields bounds the field names kept per line.
	maxReportFields = 8
	// maxFailures bounds the fail-closed regions a Report describes one by
	// one (each becomes an Anomaly record).
	maxFailures = 16
)

// Report collects what redaction replaced in one direction of an exchange,
// for the End record's Redactions and for Anomaly records. The zero value
// is ready to use; a nil *Report collects nothing. A Report is not safe
// for concurrent use.
type Report struct {
	lines    []formats.Redaction
	nfields  []int
	failures []Failure
	dropped  int   // failures not kept
	lens     []int // lengths of the values replaced (the first maxLens)
}

// maxLens bounds the value lengths a Report keeps (Frame.Redacted).
const maxLens = 4096

// Failure is a region replaced whole because it could not be parsed.
type Failure struct {
	Offset int64 // in the decoded body (or event) where the region starts
	Bytes  int64
	Why    string
}

// Empty reports whether nothing was redacted.
func (r *Report) Empty() bool { return r == nil || len(r.lines) == 0 }

// Redactions returns the lines collected so far (owned by the Report).
func (r *Report) Redactions() []formats.Redaction {
	if r == nil {
		return nil
	}
	return r.lines
}

// Failures returns the fail-closed regions collected so far and how many
// more were not kept.
func (r *Report) Failures() ([]Failure, int) {
	if r == nil {
		return nil, 0
	}
	return r.failures, r.dropped
}

// Lengths returns the lengths of the values replaced (the first 4096),
// for formats.Frame.Redacted.
func (r *Report) Lengths() []int {
	if r == nil {
		return nil
	}
	return r.lens
}

// Merge adds o's lines and failures to r.
func (r *Report) Merge(o *Report) { r.MergeAt(o, 0) }

// MergeAt adds o's lines and failures to r, o's offsets counted from off
// (o described an event or a part of a body that starts at off).
func (r *Report) MergeAt(o *Report, off int64) {
	if o == nil {
		return
	}
	for _, l := range o.lines {
		for f := range strings.SplitSeq(l.Fields, ", ") {
			r.add(l.Reason, l.Object, f, l.Count, l.Bytes)
			l.Count, l.Bytes = 0, 0
		}
	}
	for _, f := range o.failures {
		if len(r.failures) >= maxFailures {
			r.dropped++
			continue
		}
		r.failures = append(r.failures, Failure{Offset: f.Offset + off, Bytes: f.Bytes, Why: f.Why})
	}
	r.dropped += o.dropped
}

// Add records n values of bytes bytes replaced for reason.
func (r *Report) Add(reason formats.RedactReason, object, field string, n, bytes int64) {
	r.add(reason, object, field, n, bytes)
}

func (r *Report) add(reason formats.RedactReason, object, field string, n, bytes int64) {
	if r == nil {
		return
	}
	i := -1
	for j := range r.lines {
		if r.lines[j].Reason == reason && r.lines[j].Object == object {
			i = j
			break
		}
	}
	if i < 0 {
		if len(r.lines) >= maxReportEntries {
			object, field = "(more objects)", ""
			for j := range r.lines {
				if r.lines[j].Object == object {
					i = j
				}
			}
		}
		if i < 0 {
			r.lines = append(r.lines, formats.Redaction{Reason: reason, Object: object})
			r.nfields = append(r.nfields, 0)
			i = len(r.lines) - 1
		}
	}
	if n == 1 && len(r.lens) < maxLens {
		r.lens = append(r.lens, int(bytes))
	}
	l := &r.lines[i]
	l.Count += n
	l.Bytes += bytes
	if field == "" || listed(l.Fields, field) {
		return
	}
	switch {
	case r.nfields[i] < maxReportFields:
		if l.Fields != "" {
			l.Fields += ", "
		}
		l.Fields += clipField(field)
	case r.nfields[i] == maxReportFields:
		l.Fields += ", …"
	}
	r.nfields[i]++
}

// listed reports whether field is one of the ", "-separated fields: it is
// strings.Contains(", "+fields+", ", ", "+field+", ") without building
// either string.
func listed(fields, field string) bool {
	for i := 0; i+len(field) <= len(fields); {
		k := strings.Index(fields[i:], field)
		if k < 0 {
			return false
		}
		at, end := i+k, i+k+len(field)
		if (at == 0 || at >= 2 && fields[at-2:at] == ", ") && (end == len(fields) || strings.HasPrefix(fields[end:], ", ")) {
			return true
		}
		i = at + 1
	}
	return false
}

// Reset empties r for reuse, keeping its storage: what Lengths and
// Redactions returned before is overwritten by what is added after.
func (r *Report) Reset() {
	clear(r.lines)
	*r = Report{lines: r.lines[:0], nfields: r.nfields[:0], failures: r.failures[:0], lens: r.lens[:0]}
}

// fail records a region replaced because it could not be parsed.
func (r *Report) fail(off, n int64, why string) {
	if r == nil {
		return
	}
	r.add(formats.RedactUnparsed, "", why, 1, n)
	if len(r.failures) >= maxFailures {
		r.dropped++
		return
	}
	r.failures = append(r.failures, Failure{Offset: off, Bytes: n, Why: why})
}

// growFailure adds n bytes to the last failure (a region that goes on).
func (r *Report) growFailure(n int64) {
	if r == nil || n == 0 {
		return
	}
	for i := range r.lines {
		if r.lines[i].Reason == formats.RedactUnparsed {
			r.lines[i].Bytes += n
		}
	}
	if len(r.failures) > 0 {
		r.failures[len(r.failures)-1].Bytes += n
	}
}

func clipField(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// objectName names an object for a report: "Secret demo/db".
func objectName(kind, ns, name string) string {
	if kind == "" {
		kind = "object"
	}
	switch {
	case name == "":
		return kind
	case ns == "":
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}

// objectNameBytes is objectName of a namespace and name that are bytes,
// built without converting them first.
func objectNameBytes(kind string, ns, name []byte) string {
	if kind == "" {
		kind = "object"
	}
	switch {
	case len(name) == 0:
		return kind
	case len(ns) == 0:
		return kind + " " + string(name)
	}
	return kind + " " + string(ns) + "/" + string(name)
}
