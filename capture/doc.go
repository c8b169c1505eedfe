// Package capture turns packets into session records: TCP reassembly, TLS
// decryption, HTTP/1.1 and HTTP/2, and watch events.
//
// # Pipeline
//
// A Recorder takes packets in capture order (Recorder.Packet; see
// capture/pcapfile for reading files). Each packet is decoded (Ethernet,
// Linux cooked v1/v2, BSD loopback, raw IP; IPv4 and IPv6) and handed to
// gopacket's reassembly, driven by capture time: out-of-order segments wait
// up to Options.ReorderWindow of capture time for the missing bytes, then
// the bytes are declared lost (a gap). Retransmissions and overlaps are
// trimmed. A direction whose SYN was not captured starts at its first
// segment with data.
//
// From the first bytes of each connection the Recorder decides which side
// is the client and what it speaks: an HTTP/1.1 request or status line, the
// HTTP/2 client preface (h2c), a TLS ClientHello or ServerHello, or — for a
// connection captured from its middle — chunked framing. Options.Port forces
// the server side. TLS is decrypted with Options.KeyLog (capture/tlsdec); its
// ALPN picks HTTP/2 or HTTP/1.1 for the plaintext.
//
// HTTP/1.1 (http1.go) parses both directions: keep-alive, pipelining,
// Content-Length, chunked (package chunked), until-close and body-less
// responses (HEAD, 1xx, 204, 304), protocol switches. HTTP/2 (h2.go) turns
// streams into exchanges, one Chunk record per DATA frame. Both feed the
// exchange builder (exchange.go), which writes Request, Response, Body,
// Chunk and End records and splits watch bodies into Frame records with
// package frame (JSON, protobuf; gzip bodies are decoded first). Bodies that
// are not watches are stored as sent, content encoding included.
//
// # Other sources
//
// A Tee (tee.go) records connections whose bytes are seen directly — the
// recording proxy — through the same HTTP parsers, exchange builder and
// redaction, stamping each piece with the time it passed. Pcap (pcap.go)
// records a capture file; package capture/live a network interface.
// FileSink writes a session file for live sources: Meta and Summary, a
// flush every second, --max-size and --max-duration, rotation into
// numbered files that each stand alone.
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
// Data that waited behind a gap carries the capture time at which the gap
// was declared lost, up to Options.ReorderWindow after it arrived.
//
// # Secrets
//
// Credentials in headers (Authorization, Cookie, …) are never stored (see
// capture/redact). Secret objects' values are replaced, keeping lengths, in
// watch events and in bodies sent to or from Secret endpoints, unless
// Options.KeepSecrets.
//
// # Memory
//
// Bounded by Options.MaxBuffered (out-of-order TCP data), MaxConns, the
// 16 MiB event limit, the 1 MiB message head limit, and the 64 MiB limit on
// a Secret body held for redaction.
//
// # Concurrency
//
// A Recorder is used by one goroutine; it writes records to its Sink in the
// order it learns them.
package capture
