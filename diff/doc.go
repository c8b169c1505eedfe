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
// Session A is the reference, B the run under test. First, the end state
// (CategoryState, state.go): of every object either session wrote — its
// writes of every subresource together — the object as the apiserver
// answered its last successful write, or deleted if that was a DELETE of
// it or, later, of its collection (a namespace controller's DELETE of
// every Pod of a namespace); compared normalized. Then each exchange is one of three things:
//
//   - A write (POST, PUT, PATCH, DELETE). Writes are grouped per object —
//     resource and API group, namespace, name, subresource, as the path
//     names them; a create names the object its body does (metadata.name,
//     or for a metadata.generateName the canonical name below). Each
//     object's successful writes are aligned between the sessions as a
//     minimal edit script (seqalign.go): the same write (verb, request
//     key, normalized body, status) pairs at no cost, a write with the
//     same verb and another request, body or status pairs as one changed
//     write, any other is missing or extra — one missing write is one
//     difference, not a shift of every later pair; a missing and an extra
//     write that are the same are one reordered write. A write not
//     answered, or answered with anything but a 2xx (409, 429, 5xx, a 403
//     of a terminating namespace, a 404 of an object gone), is a failed
//     attempt (exch.failed): left out and counted (Counts.Attempts), and
//     named, in the first difference of its object, only where that
//     object's successful writes differ. A write that repeats the object's
//     previous successful write changes nothing and is left out
//     (Counts.Repeats); with Options.CollapseRepeats so is any write that
//     repeats an earlier one of its object — a controller's idempotent
//     writes are compared once, however often timing made it repeat them.
//     A status subresource's write one session made and the other did
//     not, between two that both made (an intermediate state one
//     controller observed and the other's coalesced events skipped), is
//     left out too (Counts.Coalesced).
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
// # Generated names and Events
//
// An object created with metadata.generateName gets its name from the
// apiserver, another in every run. diff names it by how it was made: its
// generateName, its controlling owner (unless the generateName starts with
// the owner's name) and its place among the successful creates of that
// generateName in the session — "web-796cf5c97c-#1", the first Pod created
// as "web-796cf5c97c-" —, or, where the controller made it for something
// (package internal/ident), by that instead of its place: a DaemonSet's
// Pod by its node ("agent-#DaemonSet/agent#@node=n1"), an indexed Job's
// by its completion index — and reads that canonical name wherever the
// server's appears: request paths, the objects of watch events, every
// string of every document (an Event's message, a name built on the
// generated one). Report.Pairing says which server name in A is which in
// B. Kubernetes Events (core/v1 and events.k8s.io) are named by what they
// say — type, reason, the object they are about, message, reporting
// component: Object.Event — and compared by how many times they happened
// (count, series.count), never by their name (kevents.go).
//
// # The verdict
//
// Options.Verdict names the categories whose differences make Report.Same
// false; the others are compared, counted and listed as information. By
// default, when either session holds a write, the end state and the
// writes decide (a controller's behaviour); the watch events it received,
// their timing and its reads depend on timing and do not. Sessions
// without writes (a watcher) are judged on every category.
// Options.IgnoreResources and IgnoreVerbs leave whole resources and verbs
// out of the comparison.
//
// # Normalization
//
// Documents — event objects, write bodies, response bodies — are JSON
// (protobuf of built-in kinds is decoded to the JSON the apiserver would
// send, with client-go's scheme; gzip'd bodies are decoded). Before they
// are compared, what always differs between runs is left out:
// resourceVersion and uid (anywhere), generation, managedFields and the
// list continue token (in metadata), the values of timestamp fields
// (names ending in Time, Timestamp, At or -time holding an RFC 3339
// time: creationTimestamp, lastTransitionTime, startedAt, the annotation
// endpoints.kubernetes.io/last-change-trigger-time, …; whether one is set
// still counts, null being unset), and the values of redaction placeholders
// (their lengths still count). A uid that is not a member "uid" (a Job's
// in its Pods' controller-uid labels and its selector, its Pods' in
// status.uncountedTerminatedPods) reads as the object it names, with its
// canonical name, when the session created that object or one it owns
// (names.go). Options.Ignore leaves out more paths. Member
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
//	  "verdict": ["state", "write"],  // the categories that decided "same"
//	  "summary": {            // state, writes, events, streams, exchanges: the same fields, 0 where they do not apply
//	    "state":     {"compared": 2, "missing": 0, "extra": 1, "changed": 1, …},  // objects
//	    "writes":    {"compared": 3, "missing": 0, "extra": 1, "reordered": 0, "changed": 1, "status": 0,
//	                  "resourceVersion": 0, "timing": 0, "bytesOnly": 2, "repeats": 0, "coalesced": 0, "attempts": 2},
//	    "events":    {…}, "streams": {…}, "exchanges": {…}
//	  },
//	  "states": [             // every object written, in the order of its first write
//	    {"subject": "pods demo/web-7b84c5f95f-#1", "object": {…}, "same": true,
//	     "a": {"state": "created", "writes": 1, "attempts": 0, "count": 0, "last": {place}}, "b": {…}}
//	  ],
//	  "pairing": [            // generated names: the canonical one, the server's in each session
//	    {"object": {"resource": "pods", "namespace": "demo", "name": "web-7b84c5f95f-#1"},
//	     "a": "web-7b84c5f95f-kwr78", "b": "web-7b84c5f95f-x2kq9", "exchangeA": 8, "exchangeB": 8}
//	  ],
//	  "groups": [
//	    {"subject": "configmaps demo/cm-1",
//	     "object": {"resource": "configmaps", "namespace": "demo", "name": "cm-1"},  // and group, subresource when set
//	     "differences": [
//	       {"category": "write",          // state, write, event, stream, exchange
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
// the order of their first difference: end states, writes, then streams,
// then other exchanges.
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
// The blocks holding successful creates are read once more, first, for
// the names the server generated (a table of O(creates)). An object's
// writes are aligned in time and memory linear in their number where the
// sessions agree, and O(n·m) over the part where they do not (at most
// 4 Mi pairs; past that they pair by position). The event alignment is
// greedy (the nearest common event after a difference),
// not a minimal edit script: a stream that differs more than a window
// apart is reported as what it holds missing and extra.
//
// # Concurrency
//
// Sessions and Files are safe for concurrent use (each call has its own
// state). A Report is a value the caller owns.
package diff
