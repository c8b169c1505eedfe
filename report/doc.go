// Package report writes a session, or the verdict of a diff, as one
// self-contained HTML page to look at instead of read: no network, no
// external script, style sheet or font, so it opens from a CI artifact or
// file://.
//
//	f, _ := formats.Open("session.wt", formats.ReaderOptions{})
//	report.Session(w, f, "session.wt", report.Options{})
//
//	rep, _ := diff.Sessions("recorded.wt", "run.wt", diff.Options{})
//	report.DiffFiles(w, rep, report.Options{})
//
// # What the page shows
//
// A timeline: one lane per watch (one exchange and its events) and one per
// client for its other requests (GET, LIST, writes, discovery), grouped by
// resource and namespace. Each watch event is a mark at its capture time,
// coloured by type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR); a watch's
// open span is a line, its longest silence hatched. A write is a triangle:
// filled when the client under test made it (Options.Tested; by default
// every client of a proxy or replay recording, none of a capture, as
// replay decides), hollow when another client did (the environment); the
// events a write of the client under test caused — the event of its
// object at the resourceVersion the write was answered with, and for a
// DELETE the next DELETED event of its object — are outlined, the others
// are the environment's. Anomalies are marked where they happened: the
// session's own (lost bytes, resyncs, cut bodies, malformed framing), a
// stream that did not end complete, a 410 (an ERROR event or a response),
// a watch silent for Options.StallAfter, damage of the file. Wheel to
// zoom, drag to pan (hours to microseconds); filters by resource,
// namespace, object name, client and event type; a click on a mark shows
// the event's exact bytes (and as indented JSON; a protobuf or CBOR event
// or body also as the JSON the apiserver would send, which
// apiserver/codec writes), on a request its headers and bodies and how it
// ended, on a lane's label the watch's exchange as inspect --json says
// it; in a replay's run file (replay --out), how the replay answered each
// request (its log's "how", the recorded exchange it served, why the bytes
// are not the recorded ones: the response End's note, formats.ReplayAnswer).
// Below: connections, exchanges by verb and status, events per resource and type, the busiest seconds,
// every anomaly.
//
// For a diff (Diff, DiffFiles): both sessions on one time axis, each from
// its own start (diff compares a stream's events by their time since the
// stream's start, and pairs the streams and writes of the two runs: the
// page shows the pairing through the differences), A's and B's lanes of a
// resource side by side; every difference of the Report marked where it
// is in each session and listed, a click showing the normalized documents
// side by side; the verdict and the counts per category at the top, the
// generated names paired and the end states below.
//
// # Fast and bounded
//
// The session is streamed: Session reads the file twice in file order
// (export.NewSession, then every record) and holds its index, a few bytes
// of model per event and request (a 400,000-event session: about 20 MB
// while it is written), and the first bytes of the bodies still open (at
// most 64 MiB of them at once, whatever the number of open exchanges).
// Event bytes, bodies and each exchange's details go to a store of
// gzip'd chunks of 256 KiB, written into the page as each fills, inside
// <script type="application/octet-stream"> elements the browser does not
// parse: the page decodes a chunk (base64, then DecompressionStream) the
// first time one of its items is shown. At most Options.MaxBodyBytes of
// event and body bytes are embedded (DefaultMaxBodyBytes, 16 MiB): when a
// session holds more, each exchange keeps its share — the budget times
// what it holds over what the session holds — spread over its time, and
// the marks of the rest show their metadata (and the command that prints
// their bytes); each one is cut at Options.MaxBodySize (64 KiB). The
// details of watches and writes are always there; those of other
// exchanges within a budget of their own, as large. At most 10,000
// anomalies are listed and marked (the first; the rest counted).
//
// The marks are columns of numbers (time, type, flags, object, sequence,
// store item), each a base64 string of zigzag varints (3–6 bytes a mark),
// decoded into typed arrays when the page opens. The page draws only the
// lanes in view (all of them up to 400 rows, else those scrolled to), and
// bins each lane's marks per 4 pixels at the current zoom: a bin holding
// one mark draws it, a bin holding more draws one aggregate with its
// count (a column in its types' colours, as high as the log of the count;
// a click zooms into it). What is drawn is bounded by the pixels on the
// screen, not by the events: a 65 MB session of 408,425 events opens and
// zooms without freezing (docs/BENCHMARKS.md, "Issue 36").
//
// # Secrets
//
// The page holds what the session holds, redacted as it is there:
// credentials were never recorded, Secret values are the placeholders
// redaction wrote, and redacted headers show only their length. Nothing
// is decoded back or looked up.
//
// # Concurrency
//
// Session and Diff are safe for concurrent use on different writers; a
// formats.File may be shared (its readers are).
package report
