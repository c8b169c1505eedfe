package capture

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
