package capture

import (
	"fmt"
	"io"

	"github.com/wtrace/wtrace/internal/units"
)

// What every recording returns, whatever its source: its Result.

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

// WriteSummary writes the paragraph that ends a recording, for a person:
// "Recorded WHAT SPAN: AMOUNT; counts[; anomalies, losses][; note]. files".
func (res Result) WriteSummary(w io.Writer, what, span, amount, note string) {
	fmt.Fprintf(w, "Recorded %s %s: %s; %s, %s, %s", what, span, amount, units.Count(int64(res.Conns), "connection", "connections"),
		units.Count(int64(res.Exchanges), "exchange", "exchanges"), units.Count(int64(res.Events), "watch event", "watch events"))
	if res.Anomalies > 0 {
		fmt.Fprintf(w, ", %d anomalies (see 'wtrace inspect')", res.Anomalies)
	}
	if res.LostBytes > 0 {
		fmt.Fprintf(w, "; %s of TCP payload were not captured", units.Bytes(res.LostBytes))
	}
	if res.Skipped > 0 || res.DecodeErrors > 0 {
		fmt.Fprintf(w, "; %d packets were not TCP and %d could not be decoded", res.Skipped, res.DecodeErrors)
	}
	if note != "" {
		fmt.Fprintf(w, "; %s", note)
	}
	switch names := res.Files; {
	case len(names) == 1:
		fmt.Fprintf(w, ". Session file: %s (%s).\n", names[0], units.Bytes(res.Size))
	case len(names) > 1:
		fmt.Fprintf(w, ". Session files: %s … %s (%d files, %s in all).\n", names[0], names[len(names)-1], len(names), units.Bytes(res.Size))
	default:
		fmt.Fprintln(w, ".")
	}
}
