// Package capture turns packets into session records: TCP reassembly, TLS
// decryption, HTTP/1.1 and HTTP/2, and watch events.
//
// # Pipeline
//
// A Recorder takes packets in capture order (Recorder.Packet; RecordPcap
// reads them from a file with capture/pcapfile). Each packet is decoded
// (Ethernet, Linux cooked v1/v2, BSD loopback, raw IP; IPv4 and IPv6) by
// decode.go, which accepts and refuses what gopacket's layers do (a fuzz
// target holds it to them; gopacket builds the tests' packets) without
// their package init, and its TCP segment handed to the Recorder's own
// reassembly (tcp.go), driven by capture time. Every byte keeps the
// capture time of the packet that completed it: a segment delivered in
// order carries its own packet's time, and so do the out-of-order
// segments it makes contiguous. Out-of-order segments wait up to
// Options.ReorderWindow of capture time for the missing bytes; then the
// bytes are declared lost (a gap) and what waited behind them is
// delivered with the times of its own packets. Retransmissions and
// overlaps are trimmed; bytes the snap length cut are a gap at once. A
// direction whose SYN was not captured starts at its first segment with
// data.
//
// The table of connections holds what is open: a connection that ended
// (FINs both ways, or a reset) leaves it at once, remembered for a reorder
// window only so that its late packets start nothing. When Options.MaxConns
// connections are open, a new one takes the place of the oldest flow that
// never carried data (a SYN flood, a port scan), else of the connection
// half closed the longest, else of the one idle the longest; each kind is
// reported once, with a count, at the end. Nothing is visited as capture time passes unless it holds
// out-of-order data, so recording time follows the capture's size.
//
// From the first bytes of each connection the Recorder decides which side
// is the client and what it speaks: an HTTP/1.1 request or status line, the
// HTTP/2 client preface (h2c), a TLS ClientHello or ServerHello, or — for a
// connection captured from its middle — chunked framing. Options.Port forces
// the server side. TLS is decrypted with Options.KeyLog (capture/tlsdec); its
// ALPN picks HTTP/2 or HTTP/1.1 for the plaintext. A key log that clients
// are still writing (live capture) is an Options.KeyLogSource
// (tlsdec.KeyLogFile): a TLS connection whose secrets are not there yet
// holds its records (at most tlsdec.DefaultMaxKeyWait per direction) while
// the source is re-read (every 20 ms of capture time, and at Tick between
// packets), for at most Options.KeyLogWait (DefaultKeyLogWait, 10 s) of
// capture time; then it is decrypted with the times its packets had, or
// recorded as not decrypted, as without a wait. Its end (and its ConnEnd)
// waits with it.
//
// HTTP/1.1 (http1.go) parses both directions: keep-alive, pipelining,
// Content-Length, chunked (package chunked: each chunk's extensions in its
// Chunk record, the last-chunk's in End.LastExt, trailer fields in
// End.Trailer), until-close and body-less responses (HEAD, 1xx, 204, 304),
// protocol switches. HTTP/2 (h2.go) turns
// streams into exchanges, one Chunk record per DATA frame. Both feed the
// exchange builder (exchange.go), which writes Request, Response, Body,
// Chunk and End records and splits watch bodies into Frame records with
// package frame (JSON, protobuf, CBOR; gzip bodies are decoded first). A
// body is a watch body when its response says so, as kube-apiserver
// writes a watch (frame.ResponseFormat: status 200 and the watch's media
// type): an error answer to a watch request is one opaque body.
// Bodies that are not watches are stored as sent, content encoding
// included.
//
// # Sources and the session file
//
// Every recording has one owner of its session files, a FileSink: it
// creates them, writes each one's first record (Meta, built by formats.NewMeta) and
// last (Summary: the counts of the file's own records, the source's
// formats.Totals, how the recording ended), flushes, fsyncs, enforces --max-size
// and --max-duration, and rotates into numbered files that each stand
// alone. Sources write everything in between and never Meta or Summary:
//
//   - a Recorder, fed packets (Packet);
//   - a Tee (tee.go), fed the bytes of connections seen directly — the
//     recording proxy — through the same HTTP parsers, exchange builder and
//     redaction, each piece stamped with the time it passed.
//
// One function per source runs a recording end to end, for the CLI, tests
// and Go users alike: RecordPcap (a capture file, pcap.go), live.Record (a
// network interface, package capture/live) and proxy.Record (the recording
// proxy, package capture/proxy). Each returns a Result; errors of the
// session files are *formats.OutputError. A Sink receives records that are valid
// only during Write (see Sink).
//
// # Damage
//
// Nothing is invented and nothing is dropped silently: lost bytes, streams
// captured from their middle, captures that end inside a message, framing
// errors and traffic that cannot be decrypted become Anomaly records at the
// place they happened, and parsing resumes at the next point where chunk and
// event framing agree. After a gap, TLS decryption resumes at the next
// record that authenticates (capture/tlsdec) and HTTP/2 at the next frame
// boundary (h2_resync.go): open watches go on, but header blocks of that
// direction can no longer be decoded (their compression state is lost).
// Data that waited behind a gap carries the capture time of its own
// packets, though it is written up to Options.ReorderWindow later. When a
// gap takes the head of a response on an HTTP/1.1 connection, the rest of
// its body still answers the oldest waiting request (found by its chunk
// framing, as a response captured from its middle); when it took the whole
// response, that request is recorded as unanswered and the next response
// answers the next request.
//
// # Secrets
//
// Credentials in headers (Authorization, Cookie, bearer and basic
// credentials in any field) and in the request-target's query are never
// stored, whatever the options. Unless Options.KeepSecrets, the exchange
// builder also redacts by content (package capture/redact says exactly
// what): every watch event, the partial event at the end of a cut stream,
// and every opaque body, request or response, whether its request was
// captured or not. Opaque bodies go through a redactStream (redact.go) as
// they arrive; a content-encoded (gzip, deflate) body is decoded to be
// read, and stored as sent while nothing in it must change, or re-encoded
// with the same coding from the moment something must (its End says
// "stored re-encoded after redaction"; its chunk records are dropped, they
// describe the wire's bytes). What was replaced, and why, goes to each
// direction's End.Redactions; bytes replaced because they could not be
// parsed also become Anomaly records.
//
// # Memory
//
// Bounded by Options.MaxBuffered (out-of-order TCP data), MaxConns, the
// 16 MiB event limit, the 1 MiB message head limit, and redaction's
// limits: a JSON body streams, holding at most redact.MaxHold (16 MiB) of
// values whose object's kind is not known yet; a protobuf object of a kind
// that holds credentials, a CBOR body and a YAML body are held whole up to
// redact.MaxHoldWhole (64 MiB), past which they are replaced; a gzip'd body's
// compressed bytes are held up to maxHeldEncoded (4 MiB), then released as
// sent as soon as their content has been read (a credential found after
// that replaces the rest of the body instead of re-encoding it).
//
// # Parsing connections in parallel
//
// With Options.Workers (RecordPcap: GOMAXPROCS by default on more than two
// cores; on two, compression already has the second core and workers
// cost 5–7%, so one goroutine parses) the Recorder's
// goroutine still decodes packets and reassembles TCP, in capture order,
// but what reassembly delivers to a connection becomes an op of a batch
// (its bytes copied), and a pool of workers parses the batch a connection
// at a time — detection, TLS, HTTP, event splitting, redaction, each
// connection with a session of its own — while the next batch fills. The
// records are merged back on the Recorder's goroutine in op order and
// renumbered (connections and exchanges) as one session would have; the
// Sink receives the same records, IDs, times and bytes as without workers
// (par.go says how; TestWorkersSame holds every capture the tests use to
// it). Counts that no record states come through the merge too, and a
// pcapng's Decryption Secrets Block waits until what came before it is
// parsed. Connections waiting for TLS secrets (KeyLogWait, KeyLogSource)
// keep one goroutine: their wait couples connections through time. Memory
// adds two batches (1 MiB of bytes each, plus the records they produced)
// and a small session and merge state per open connection.
//
// # Concurrency
//
// A Recorder is used by one goroutine; it writes records to its Sink in the
// order it learns them, from that goroutine (with Options.Workers, a batch
// later: Tick and Close write what is pending). Its workers, if any, end
// at Close (or when the Sink fails).
package capture
