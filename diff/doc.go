// Package diff compares two sessions and says what is different at the
// level a controller author cares about: the writes a client made, the
// watch events it received, the statuses it got, and when. It is the
// verdict of a regression suite: the session a replay run recorded
// against the recording it replayed, or two recordings of one scenario
// (before and after an upgrade).
//
//	rep, err := diff.Sessions("recorded.wt", "run.wt", diff.Options{})
//	if !rep.Same { rep.WriteText(os.Stdout, diff.TextOptions{}) }
//
// Package diff/difftest fails a Go test with that report.
//
// # What is compared
//
// Session A is the reference, B the run under test. Each exchange is one
// of three things:
//
//   - A write (POST, PUT, PATCH, DELETE). Writes are grouped per object —
//     resource and API group, namespace, name, subresource, as the path
//     names them; a create names the object its body does (metadata.name,
//     or metadata.generateName and "*") — and paired in request order by
//     verb (a PATCH by its kind too: json, merge, strategic, apply).
//     Their bodies (and the query parameters that do not vary from run
//     to run) are compared as normalized JSON; their statuses too.
//     Unpaired writes are missing or extra; a write that pairs only out
//     of order is reordered. With Options.CollapseRepeats a write that
//     repeats an earlier one of its object (verb, parameters, normalized
//     body, status) is left out: a controller's idempotent writes are
//     compared once, however often timing made it repeat them.
//   - A watch (watch=true, a legacy /watch/ path, or a body the recorder
//     split into events). Watches are grouped into streams per scope —
//     method, path, selectors, and any Accept transformation (as=Table) —
//     and a watch that began after another of its scope ended continues
//     that one's stream (a re-watch; on the same connection first), while
//     watches open at the same time are separate streams, paired in the
//     order they began. Paired streams compare the set of their HTTP
//     statuses and their events: paired by identity (type, and the
//     object's kind, namespace and name; an ERROR's code and reason) in
//     order, each pair compared byte for byte, then normalized. Events are
//     missing, extra, reordered, changed; with Options.CompareRV also
//     differing in resourceVersion; and late or early when their time
//     since their stream's start (its first response head) moved by more
//     than Options.TimeTolerance.
//   - Any other exchange (LIST, GET, discovery): paired by request key
//     (method, path, the query parameters that do not vary from run to
//     run — the replay matcher's rule), in order; status and response body
//     compared, the body normalized when it is JSON or a Kubernetes
//     protobuf object.
//
// # Normalization
//
// Documents — event objects, write bodies, response bodies — are JSON
// (protobuf of built-in kinds is decoded to the JSON the apiserver would
// send, with client-go's scheme; gzip'd bodies are decoded). Before they
// are compared, what always differs between runs is left out:
// resourceVersion and uid (anywhere), generation, managedFields and the
// list continue token (in metadata), the values of timestamp fields
// (names ending in Time, Timestamp or At holding an RFC 3339 time:
// creationTimestamp, lastTransitionTime, startedAt, …; whether one is set
// still counts, null being unset), and the values of redaction placeholders
// (their lengths still count). Options.Ignore leaves out more paths. Member
// order does not matter. Pairs that differ in bytes but not after this
// are counted in Counts.BytesOnly and are not differences. A changed
// document is shown as a unified diff of both normalized documents,
// rendered with sorted members, one value per line.
//
// # The report
//
// Report holds the counts per category (Summary), then the differences
// grouped by subject (an object — its writes, the events about it, GETs
// of it — a watch stream, or a request naming no object), at most
// Options.MaxDifferences of them listed. Report.WriteText prints it for a
// person; its JSON form is the output of `wtrace diff --json`, a stable
// interface (fields may be added, never renamed):
//
//	{
//	  "a": "recorded.wt", "b": "run.wt",
//	  "same": false,
//	  "summary": {            // writes, events, streams, exchanges: the same fields, 0 where they do not apply
//	    "writes":    {"compared": 3, "missing": 0, "extra": 1, "reordered": 0, "changed": 1, "status": 0,
//	                  "resourceVersion": 0, "timing": 0, "bytesOnly": 2, "repeats": 0},
//	    "events":    {…}, "streams": {…}, "exchanges": {…}
//	  },
//	  "groups": [
//	    {"subject": "configmaps demo/cm-1",
//	     "object": {"resource": "configmaps", "namespace": "demo", "name": "cm-1"},  // and group, subresource when set
//	     "differences": [
//	       {"category": "write",          // write, event, stream, exchange
//	        "kind": "changed",            // missing, extra, reordered, changed, status, resourceVersion, timing
//	        "what": "PUT",                // a write's verb ("PATCH (merge)"), an event's type, an exchange's method
//	        "stream": "…",                // events and streams: "watch configmaps -n demo"
//	        "a": {"exchange": 1, "request": "PUT /api/v1/…", "seq": 0, "index": 0, "time": "…",
//	              "offset": 0, "status": 200, "resourceVersion": "…", "name": "demo/cm-1"},
//	        "b": {…},                     // a is absent for extra, b for missing
//	        "count": 0,                   // timing: events beyond the tolerance; missing/extra streams: events
//	        "delta": 0,                   // timing: the largest B−A offset, ns
//	        "detail": "…",
//	        "diff": "--- …\n+++ …\n@@ …"}
//	     ]}
//	  ],
//	  "omitted": 0,                      // differences counted but not listed
//	  "warnings": ["…"]                  // what could not be compared (damage, undecodable bodies)
//	}
//
// In a Place, seq and offset (ns since the stream's start) are set for
// events only; index counts from 0 among what was paired (the n-th write
// of the object, the n-th event of the stream, the n-th exchange of the
// request); fields that do not apply are omitted. Subjects are listed in
// the order of their first difference: writes, then streams, then other
// exchanges.
//
// # Memory and time
//
// Sessions reads each file's index, then once the blocks holding bodies
// of exchanges that are not watches (keeping a 64-bit digest of each body,
// never the body), then each stream pair's blocks, streaming: the event
// alignment holds nothing while the streams agree, and at most
// Options.Window events (and Options.WindowBytes) read ahead or set aside
// on each side where they do not. Memory is O(exchanges) plus that
// window, whatever the number of events; a document is decoded only when
// its bytes differ, and its tree kept only to render a listed difference.
// Bodies and events over Options.MaxBodySize are compared byte for byte.
// The alignment is greedy (the nearest common event after a difference),
// not a minimal edit script: a stream that differs more than a window
// apart is reported as what it holds missing and extra.
//
// # Concurrency
//
// Sessions and Files are safe for concurrent use (each call has its own
// state). A Report is a value the caller owns.
package diff
