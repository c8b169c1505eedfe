// Package replay serves a recorded session (a .wt file) over HTTP to real
// Kubernetes clients — informers, kubectl, curl — with the original timing.
//
//	srv := replaytest.NewServer(t, "testdata/incident-42.wt", replay.Options{Speed: 0})
//	cs, _ := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
//
// (replaytest.NewServer, in package replay/replaytest, opens, starts and
// closes the server with the test, like httptest.NewServer; it lives apart
// so that package testing is not linked into programs that serve sessions.)
//
// New (or Open) prepares a Server; Start or StartTLS listen (127.0.0.1 and a
// free port unless Options.Listen says otherwise) and set URL; Handler
// mounts it elsewhere; Close cancels every request in flight and returns
// once every handler goroutine has exited, like httptest.Server.
//
// # Two replays: a world, or a tape
//
// A replay that answers writes (Options.Writes WritesAnswer, the default,
// or WritesApply, the same) is an apiserver whose world is the
// recording's environment: it is what a controller under test is run
// against. A read-only replay (WritesReject) and WritesRecorded serve the
// recording itself, a tape: each client gets the recorded answers on a
// timeline of its own, byte for byte, chunk for chunk — what informers,
// kubectl get -w and scale tests of many watchers are replayed with. The
// sections below, from Matching to Many clients, are the tape's rules,
// save where they say otherwise; this one is the world's.
//
// The clients under test (Options.Clients, wtrace replay --client; by
// default every client of a session recorded through the proxy or of a
// replay's run, none of a capture) are what a run is compared with: their
// successful writes, and the versions of objects those writes made (the
// resourceVersion each answer carried, or the object's next version after
// the request: a deletion's versions until the object is gone), are the
// expected output and never replayed. Everything else the recording shows
// — what kubectl, other controllers, the scheduler, kubelets changed — is
// the environment, the run's input (package apiserver/world, Environment):
//
//   - The world starts as the session first shows it: every object of the
//     first LISTs, GETs and watches, before anything a watch showed
//     changing.
//   - Each change of the environment is applied to the world in
//     resourceVersion order: as recorded, byte for byte, while the world
//     holds the version the change was made to; else what the change
//     changed (the merge patch from the recorded version before it, less
//     the server's fields) is applied to the run's version of the object,
//     whose generation and resourceVersion the world sets — a change made
//     over the recorded controller's status keeps the run's status.
//   - Changes to objects the clients under test created in the recording
//     (a Pod a controller created, later bound by the scheduler, updated
//     by a kubelet) follow the run's corresponding object — paired by
//     resource, namespace, generateName (or name), owners and order — or
//     are dropped when the run did not create it (a change waits
//     PairWait for the run's create first); so is a change to an object
//     the run deleted. The log says which (Info lines,
//     "environment change dropped"), as do Server.Environment and the run
//     file's Summary.
//   - A change to an object the session never showed before (a watch
//     whose LIST the capture missed) is served as recorded: its DELETED
//     is not dropped, its first MODIFIED stays a MODIFIED — the object
//     existed, the session just began after it.
//   - Pace (Options.Pace, --pace): PaceRecorded applies each change at its
//     recorded time scaled by Speed, on a timeline that starts when the
//     run's clients first watch (their informers started, after a leader
//     election say), mapped to the recorded clients' first watch; Speed 0
//     applies the first once the clients are quiet, each next once every
//     watcher was sent the one before. PaceQuiet applies each once the
//     clients have been quiet — no request in flight but watches and lease
//     renewals, none begun or ended for Options.QuietWindow — and have
//     made the writes the recording shows before it (object by object, a
//     created object as its recorded counterpart:
//     world.Store.WritesBehind), or once its recorded gap after the one
//     before has passed (DefaultQuietMaxWait at most), whichever comes
//     first; so that a controller reconciles each change before the next
//     and every run sees the same sequence, as fast as the controller
//     goes, and a controller that batches its work (the job controller
//     syncs a Job a second after its Pods changed) meets together the
//     changes it met together when recorded. After the last change the
//     clients get as long as the recorded ones kept working after it, or
//     with PaceQuiet until they made every write the recording shows
//     (EnvironmentDone closes then); Settle waits for that and for
//     quiet: the run is over.
//   - Every read is answered from the world when it arrives — GET, LIST,
//     WATCH (its events as the world changes, the run's writes among the
//     environment's), discovery (recorded, or synthesized with each
//     resource's real scope), kube-apiserver v1.33's OpenAPI documents
//     (package apiserver/openapi) — never from the recorded sequence.
//     Recorded bytes go out where they are what the world holds (the
//     environment's changes applied as recorded).
//   - Writes are the world's, as kube-apiserver v1.33 answers them (see
//     package apiserver/world: defaults, admission, strategies, field
//     validation, field managers, finalizers), never a recorded answer. A
//     write lands Options.WriteLatency after it arrived (by default the
//     recorded apiserver's median), and its answer goes out once its watch
//     events went out to every watcher: a controller reading its cache
//     after its write finds it, as against a real apiserver.
//   - Loop, Hold and EventChunks are the tape's; a world replay sends one
//     event per chunk, as the apiserver does, and keeps watches open until
//     their timeoutSeconds.
//
// # Matching
//
// A request is matched with the recorded exchanges that have the same
// method, path, and query parameters (in any order, values compared
// exactly) apart from the parameters that differ from run to run:
// resourceVersion, resourceVersionMatch, timeoutSeconds, timeout, limit,
// continue, allowWatchBookmarks and sendInitialEvents. watch=1 and
// watch=true are the same; the legacy /api/v1/watch/… paths are watches of
// the path without "watch". labelSelector and fieldSelector must match.
//
// Among the candidates, the client's own state decides, since a client only
// knows the resourceVersions and continue tokens the replay served it:
//
//   - LIST/GET: a request with a continue token gets the recorded page
//     fetched with that token (a token the session does not hold gets 410
//     Expired, as from the apiserver); otherwise candidates without one,
//     those with the request's resourceVersion ("" and "0" are alike)
//     preferred. Successive requests get successive candidates in recorded
//     order (one cursor per key and request class), then the last one again.
//   - WATCH from a resourceVersion: the recorded watch that was started from
//     that resourceVersion (so an informer's watch from its LIST's
//     resourceVersion gets the watch that followed that LIST, and its next
//     watch from the last event or bookmark gets the recorded re-watch).
//     Otherwise, if a recorded watch of the key carries an event (or
//     bookmark) with that resourceVersion among its live events (all events
//     of a watch started from a resourceVersion; those from the
//     initial-events-end bookmark on for a streaming list), the client
//     resumes just after its last such event: the rest of that watch, on a
//     timeline starting at that event's time. Recorded watches of one key
//     see one history, so this continues it across recorded watches.
//   - WATCH from "" or "0": recorded watches in recorded order (cursor).
//
// Among candidates that are otherwise equal, a client gets the one whose
// Content-Type its Accept header names (a protobuf client the protobuf
// watch, a JSON client the JSON one; JSON when it does not say).
//
// After the last match: a LIST gets the last recorded LIST again; a watch
// with nothing left to resume (from the resourceVersion of the last event
// of the recorded watches that carry it) or from a resourceVersion past the
// newest the session holds for its key gets an empty watch that stays open,
// as a quiet apiserver's does, until the client's
// timeoutSeconds (then a clean end), the client leaves, or Close — so an
// informer that has seen everything stays synced and idle instead of
// relisting or spinning. A watch from a resourceVersion the session does not
// know (older, or not numeric) gets a 200 stream with one ERROR event
// carrying a 410 Expired Status, as the apiserver sends for a compacted
// resourceVersion: the client relists, and the LIST brings it back onto the
// recorded history.
//
// A watch captured from its middle (the capture began inside its
// response: no request, often no response head) is matched by the
// request its events show (world.MidstreamTarget): a GET of the
// collection of their objects' kind — the plural the apiserver's REST
// mapper guesses, ConfigMap → configmaps — in their namespace when every
// event names the same one, else across all namespaces, with watch=true
// and nothing else (its selectors and resourceVersion are unknown: a
// client that asks with selectors does not get it). Its events are all
// history a client can resume after, as for a watch started from a
// resourceVersion; a watch from "" gets it from its first captured event.
// Events of several kinds, Tables, PartialObjectMetadata and opaque bodies
// show no request: such exchanges are not served. The world loads them
// as the same watch.
//
// Nothing matches and the world (below) cannot answer either: 404 with a
// Kubernetes Status body (reason NotFound), and a warning naming the
// request and the closest recorded requests.
//
// # Clients that were not recorded
//
// A streaming list (watch with sendInitialEvents=true, client-go's
// WatchList, on by default since v0.35) against a session that recorded
// LIST + WATCH gets ADDED events built from the recorded LIST (all its
// pages), the k8s.io/initial-events-end BOOKMARK at the LIST's
// resourceVersion, then the recorded WATCH that started from that
// resourceVersion on its own timeline. The reverse: a LIST against a
// session that recorded only a streaming list gets a LIST built from its
// initial ADDED events at the bookmark's resourceVersion; the WATCH that
// follows resumes after the bookmark (see above). JSON and protobuf alike.
//
// Discovery (/version, /api, /apis, /api/v1, /apis/<group>[/<version>]) is
// served as recorded if it was, else synthesized from the resources of the
// recorded requests (kinds from their objects), with verbs get, list and
// watch, as plain application/json: clients asking for aggregated discovery
// fall back to it. /version is kube-apiserver v1.33's. kubectl get -w works
// against a replay.
//
// # Writes and the world of a tape
//
// A read-only replay (WritesReject) loads the session's world too
// (package apiserver/world, every version of every object the recording
// shows, bounded by Options.StateBytes) and answers from it, at the
// world's point — the newest recorded resourceVersion served to any
// client — the reads the recording cannot: a GET of one object, a LIST
// with other selectors or of another namespace or resource (selectors
// evaluated as the apiserver does, paginated as it pages them), a watch of
// other parameters or resumed from a resourceVersion the recording does
// not show (the world's history from there at the recorded pace, or 410
// Expired when it is older than the session). Every write gets 403
// Forbidden. WritesRecorded keeps no world: a write gets a recorded
// exchange of the same method and path, or 404; no Status is synthesized,
// no encoding changed.
//
// Discovery of a replay that keeps a world is kube-apiserver v1.33's
// (package apiserver/world's copy of its legacy and aggregated discovery:
// every built-in resource, subresource and verb it serves), with the
// session's resources it does not serve (custom resources) added, every
// verb theirs; a resource it does not serve and the session does not
// show gets its 404.
//
// # Encodings
//
// A client gets what its Accept header asks for (package apiserver/codec):
// JSON or protobuf, Table (as=Table, kubectl), PartialObjectMetadata(List)
// (metadata-only informers), for recorded answers too. A recorded body or
// stream whose encoding the header names without a transformation goes
// out as recorded, byte for byte (a protobuf client that also accepts
// JSON gets a JSON recording as it is); otherwise it is transcoded, event
// by event for a watch, and the log line says so (transcoded=protobuf→json,
// transcoded=Table, …). A kind the replay does not know is served as
// recorded; nothing acceptable is 406 with a Status.
//
// CBOR (a recording of an apiserver with CBORServingAndStorage and
// clients that prefer CBOR): a client whose Accept header names
// application/cbor (application/cbor-seq for a watch) gets a CBOR
// recording as recorded, byte for byte (client-go with ClientsAllowCBOR
// asks "application/json;q=0.9,application/cbor;q=1"); any other client
// gets it transcoded like a JSON or protobuf recording (JSON, protobuf,
// Table, PartialObjectMetadata; transcoded=cbor→json, …). The world loads
// CBOR objects too. Nothing is transcoded into CBOR: the replay negotiates
// as kube-apiserver v1.33 with the gate off, so a client that accepts
// CBOR alone gets 406 NotAcceptable for a JSON or protobuf recording and
// for what the world answers. Write bodies in CBOR (client-go with
// ClientsPreferCBOR: creates, updates, DeleteOptions) are read, as the
// gate's apiserver reads them, and answered in JSON, which those clients
// also accept; a CBOR apply patch (application/apply-patch+cbor) gets 415,
// after which client-go sends JSON.
//
// # Recording the run
//
// Server.Requests lists every request the clients made, in arrival order:
// method, target, header fields, the body of a write, the answer's
// status, how it was answered (recorded, synth-create, …), whether it was
// transcoded, the body of a write's answer, and both times (the first
// Options.MaxRequests). A test asserts on the writes of the controller
// under test with Server.Writes.
//
// Options.Out receives every exchange as HTTP/1.1 bytes (see Out);
// package replay/record writes them into a session file (source
// "replay", redacted as any recording: wtrace replay --out), which
// inspect, events and diff read like any other.
//
// # Responses and timing
//
// A response keeps the recorded status and header fields, except hop-by-hop
// fields, Date (net/http sends the current one), redacted values, and
// Content-Length, sent only when the body goes out exactly as recorded with
// a recorded length. An opaque body goes out byte for byte, gzip'd as
// recorded when the client's Accept-Encoding allows it, otherwise decoded.
// A watch body goes out as its exact event bytes, chunk by chunk: each
// recorded chunk (or, with EventChunks, each event) is written and flushed
// at
//
//	request arrival + (t − response start) / Speed
//
// where t is the chunk's recorded time and response start the Response
// record's time. Speed 0 sends everything as fast as the client reads.
// Each recorded chunk keeps its chunk extensions, and a body that ends as
// recorded ends with the recorded last-chunk (its extensions) and trailer
// fields (those redaction left alone), where the replay writes the
// chunked framing itself (watches over HTTP/1.1); through net/http (HTTP/2,
// bodies that are not watches) the trailer fields go out as trailers and
// chunk extensions, which net/http cannot write, are left out.
// A stream ends as recorded, at its recorded end time: a clean end
// (terminating chunk), an abort (connection closed without it, FIN) or a
// reset (RST; over HTTP/2 both become RST_STREAM). A watch the capture
// ended inside stays open (until timeoutSeconds, the client leaves, or
// Close); so do all streams with Hold. The client's timeoutSeconds always
// ends a watch cleanly, as the apiserver does, after timeoutSeconds / Speed
// of replay time: it counts recorded time, like the stream's own times (a
// watch with timeoutSeconds=60 at Speed 2 ends after 30 s, where the
// recorded one ended; at Speed 0 it counts real seconds). With Loop a
// watch that reaches its end starts again from its first event, one
// recorded duration later, forever; cursors then wrap around too.
//
// # Damaged sessions
//
// New checks the checksum of every block of the session (the index of a
// cleanly closed file does not show a block damaged since) and reads the
// exchanges a damaged region touches, to say what it lost: Losses lists,
// per exchange, how many events (or body bytes) are missing, after which
// event, between which capture times, and the damage (block, file offset).
// A stream is served without what was lost; when it reaches a loss the
// log says so (a warning), and it then ends cut — the connection closed
// without the terminating chunk, or RST_STREAM over HTTP/2 — at the point
// where it would have ended cleanly, so that no client takes what it got
// for the complete recording. A client that resumes from an event after
// the loss gets the rest, ending as recorded.
//
// # Many clients, memory
//
// Each request is served on its own timeline; no lock is held while
// writing, and every blocking write has a deadline
// (Options.WriteTimeout) so a client that stops reading is dropped without
// delaying anyone. Over HTTP/1.1 a watch stream takes its connection over
// from net/http (Hijack) and writes the chunked framing itself, so that
// chunks that are due together — a burst, or a client that fell behind —
// leave in one writev, each still its own chunk; net/http would make one
// system call per chunk. The response then says Connection: close, and the
// connection closes after the stream (clients open a new one for their next
// request). HTTP/2 streams go through net/http, one DATA frame per chunk.
// Such an HTTP/1.1 watch runs on a goroutine of its own from the moment it
// took its connection over, and ServeHTTP returns: net/http's goroutine,
// buffers and request for the connection are freed while the watch goes
// on.
//
// On Linux, on the real clock, over plain TCP, a recorded watch stream
// of a tape that waits for its next write holds no goroutine at all
// (without Options.Out): it
// parks in the server's scheduler, a heap of waiting streams by due time
// with one goroutine (one such shard per GOMAXPROCS), which writes each
// due stream's chunks itself with a non-blocking writev and parks it
// again — as the floor of BenchmarkLateness does, one loop for many
// watchers. Only what could block
// goes to a goroutine of the stream's own, which parks it again or ends it:
// a write the client does not take at once (finished with the write
// timeout, so a slow client never delays the others), reading the session
// file (an exchange too large for the cache, a transcoded or rewritten
// stream), a Loop pass, the end of the stream. An idle watcher holds its
// connection and its state: about 2.6 KiB (docs/BENCHMARKS.md). A parked
// stream has no reader: the scheduler checks every parked connection
// without blocking once a second, so a client that disconnects is noticed
// within 2 s (or by a write to it that fails), and everything it held is
// released.
// A watch the world serves (every watch of a replay that answers writes)
// parks the same way between its events: it is woken by the world's
// changes (one goroutine waits on them for all), sends what its scope
// sees, and parks again. Its events are encoded once for all the watches
// of a scope and plain encoding (world.Watch.Take), so ten thousand
// watchers of a resource cost one writev each per change
// (BenchmarkLateness, docs/BENCHMARKS.md).
// Elsewhere (a FakeClock, TLS, Follow, other platforms) the stream keeps
// its goroutine and waits in a read of its connection with the read
// deadline as its timer (plain TCP on the real clock), or on a timer with a
// reader goroutine, and a client that disconnects is noticed at once.
//
// Exchanges are decoded into immutable timed writes once
// and shared by all clients, in a cache bounded by Options.CacheBytes; an
// exchange larger than a quarter of it is streamed from the file for each
// client instead, so a long session is never held in memory whole.
// A keep-alive connection that waits for its next request longer than
// Options.IdleTimeout (kube-apiserver's 90 s by default) is closed, over
// HTTP/2 with a GOAWAY; a connection serving a watch is never idle.
//
// The world is the exception: it holds every version of every object the
// session shows (their bytes, not decoded objects), up to
// Options.StateBytes (1 GiB by default; New fails beyond it, and
// WritesRecorded keeps no world). Serving a recorded event with the world
// costs an atomic load while nothing is shifted; a transcoded recorded
// event is decoded and encoded again for each client (the world's own
// events, once per scope and encoding). The request log keeps the
// first Options.MaxRequests requests (100,000 by default), with the
// bodies of writes and of their answers (3 MiB each at most).
//
// # The control endpoint
//
// With Options.Control, a Server also answers /wtrace/v1/ (control.go;
// the contract, version 1, is docs/CONTROL.md): status, settle (Settle
// over HTTP), environment (Environment and EnvironmentDone), requests
// (Requests, Writes) and stop (Control.Stop) — what a test drives a
// replay with from another process, in any language (the Go module
// wtracetest is its client; wtrace replay --control). Its requests are
// not the clients': not logged, not recorded, not activity.
//
// # Concurrency
//
// A Server is safe for concurrent use. It starts goroutines (the listener,
// net/http's per connection, the scheduler's shards, and one per stream
// that must not park); Close stops them all.
//
// # Code
//
// The package is the front door: the Server (options.go, server.go: New
// and Open; lifecycle.go: Start, Close, Shutdown; preload.go: the
// listener that answers while a session loads; health.go, guard.go: its
// own endpoints and its Host and path filter; banner.go, cert.go), the
// request log and Out (out.go, reqlog.go), and handler.go, where
// ServeHTTP reads a request, asks an answerer for its answer and hands
// it to a stream. A request walks down from there, never back:
//
//   - fromtape: the tape's answers — which recorded exchange answers a
//     request, resumed watches, streaming lists and lists synthesized
//     from each other, recorded answers rewritten for the world's point
//     or transcoded (flows), 410s, discovery, OpenAPI, damage.
//   - fromworld: the world's answers — the world's watches (parked,
//     woken by its changes), the reads and writes of a Live world, the
//     environment's driver and the clients' activity, 403 for a
//     read-only replay's writes. The tape asks it for what the recording
//     lacks; a Live world's replay asks it first.
//   - stream: how one answer is written with its timing — taking an
//     HTTP/1.1 connection over, sending, the one batching loop (Play
//     over a Feed), waiting and parking, the end; the Hub the streams
//     share.
//   - tape: how recorded answers are chosen and read — the matcher,
//     resume points, each exchange's body as timed writes, what damage
//     lost. pace: the clock and the scheduler of parked streams.
//     discovery: the synthesized discovery documents. metrics: the
//     Prometheus metrics.
//
// Each has its contract in its package comment.
package replay
