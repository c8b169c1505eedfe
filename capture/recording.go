package capture

// What every recording shares, whatever its source: the Meta its files
// begin with, the Result it returns, the errors of its files.

import (
	"os"

	"github.com/wtrace/wtrace/formats"
)

// NewMeta returns the Meta a recording's files start with: tool (the
// recorder and its version, "wtrace v0.3.0"), the host name, source
// (formats.SourcePcap, SourceIface, SourceProxy), description, and the
// redaction mode keepSecrets chooses (formats.RedactionDefault, or
// RedactionHeadersOnly when Secret values are kept). The FileSink sets
// Recorded when it creates each file; callers add CaptureFile and Labels.
func NewMeta(tool, source, description string, keepSecrets bool) formats.Meta {
	host, _ := os.Hostname()
	m := formats.Meta{Tool: tool, Host: host, Source: source, Description: description, Redaction: formats.RedactionDefault}
	if keepSecrets {
		m.Redaction = formats.RedactionHeadersOnly
	}
	return m
}

// Result says what a recording did (RecordPcap, live.Record,
// proxy.Record), for the summary a user reads.
type Result struct {
	// Stats is what the source saw: the Recorder's, or the Tee's.
	Stats
	// Note is why the recording ended before its source did ("stopped by
	// the user", "max-size reached", "capture failed: …"), as the last
	// file's Summary says; "" when the source ended.
	Note string
	// Files are the session files written, in order ("-" for a stream);
	// Size the bytes written to them.
	Files []string
	Size  int64

	// Read is the number of bytes read from a capture file (as given,
	// before decompression).
	Read int64
	// XXH64 is the hex XXH64 of the capture file (what xxhsum prints),
	// if it was read to its end; SHA256 its hex SHA-256, if asked for
	// (PcapOptions.CaptureSHA256).
	XXH64, SHA256 string
	// ReadErr is set when the capture file is damaged or cut: every packet
	// before the damage was recorded, nothing after it.
	ReadErr error
	// Dropped counts the packets a live capture lost because they were not
	// read in time (the kernel's receive buffer was full).
	Dropped int64
}

// OutputError is an error of the session files a recording writes, as
// opposed to one of its source: they could not be created (Created false)
// or written. A FileSink's errors are OutputErrors.
type OutputError struct {
	Path    string // the session file (the first one, for a rotated recording); "-" for a stream
	Created bool   // the file existed: the error came while writing, syncing or closing it
	Err     error
}

func (e *OutputError) Error() string {
	if !e.Created {
		return "capture: creating " + e.Path + ": " + e.Err.Error()
	}
	return "capture: writing " + e.Path + ": " + e.Err.Error()
}

func (e *OutputError) Unwrap() error { return e.Err }
