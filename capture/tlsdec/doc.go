// Package tlsdec decrypts captured TLS 1.2 and 1.3 connections with the
// secrets of an NSS key log (SSLKEYLOGFILE), as written by Go's
// tls.Config.KeyLogWriter, curl, browsers or OpenSSL's keylog callback.
//
// It sits between TCP reassembly and HTTP parsing: the caller pushes each
// direction's in-order TCP payload, in pieces of any size, with the capture
// time of each piece, and a Sink receives the decrypted application data of
// each direction in order, with the capture time of the piece that completed
// the record carrying it.
//
//	keys, err := tlsdec.ParseKeyLog(f)      // bad lines are counted in keys.Stats(), not fatal
//	c := tlsdec.NewConn(keys, sink, tlsdec.Options{})
//	c.Feed(tlsdec.ClientToServer, payload, t) // for every in-order piece
//	c.Gap(tlsdec.ServerToClient, n)           // capture loss
//	info := c.Info()                          // version, suite, ALPN, SNI, Decrypted, Note, counters
//
// # What is decrypted
//
// TLS 1.3 (RFC 8446) with TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and
// TLS_CHACHA20_POLY1305_SHA256: handshake records under the handshake
// traffic secrets (EncryptedExtensions gives the ALPN), application records
// under CLIENT_/SERVER_TRAFFIC_SECRET_0 after each side's Finished,
// KeyUpdate in either direction, HelloRetryRequest, PSK resumption, and
// 0-RTT data when CLIENT_EARLY_TRAFFIC_SECRET is logged (otherwise it is
// skipped and counted). Middlebox-compatibility ChangeCipherSpec records are
// ignored. If a handshake secret is missing but the application secret is
// not, the handshake records are skipped and application data is still
// decrypted.
//
// TLS 1.2 (RFC 5246) with the master secret of a CLIENT_RANDOM line, any key
// exchange: AES-GCM (RFC 5288/5289), ChaCha20-Poly1305 (RFC 7905) and
// AES-CBC with HMAC-SHA1/SHA256/SHA384 (MAC-then-encrypt). A resumed session
// is decrypted when the key log has a CLIENT_RANDOM line for the resumed
// connection's client random (Go's client logs only full handshakes; the
// master secret of the original session can be logged under the new
// random).
//
// Not supported, with a Note saying so: TLS 1.0/1.1 and SSL 3, other suites
// (3DES, RC4, CCM, ARIA, Camellia, ...), encrypt_then_mac (RFC 7366), TLS 1.2
// renegotiation (decryption stops at the renegotiation), SSLv2-format
// ClientHellos, and connections whose handshake is not in the capture: the
// client random comes from the ClientHello, so a capture that starts
// mid-connection cannot be decrypted.
//
// # Contract
//
// A Conn is for one TCP connection. It is not safe for concurrent use: one
// goroutine calls Feed, Gap and Info. Feed never retains p. Sink.Data's
// slice is valid only during the call. Direction ClientToServer is the side
// that sent the ClientHello.
//
// The directions may be fed in any interleaving. The client's records after
// its ClientHello are held until the ServerHello is fed (and the server's
// until the ClientHello), up to Options.MaxPending bytes per direction; feed
// roughly in capture order to keep that small.
//
// Errors: Feed returns an *Error (direction, record number, stream offset)
// wrapping ErrNotTLS, ErrMalformed or ErrDecrypt at most once per direction;
// that direction then only counts bytes. Missing keys are not errors:
// Info.Decrypted is false and Info.Note names the missing secret and client
// random. Nothing is ever invented: data reaches the Sink only after it
// authenticated.
//
// # A key log that is still being written
//
// Live, the key log is a file the clients are still writing: a
// connection's first encrypted records arrive before its secrets can be
// read. KeyLogFile reads such a file by whole lines and Refresh reads what
// was appended since (a line being written waits for its newline). With
// Options.KeyWait a Conn holds a direction's encrypted records, and what
// follows them, while the key log lacks the secret they need, at most
// Options.MaxKeyWait bytes (DefaultMaxKeyWait, 1 MiB); WaitingKeys says
// so, Retry (after the key log grew: KeyLog.Generation changed) decrypts
// what the secrets now open, with the times the records were fed, and
// StopWaiting, or the bound, gives up: the held records are then handled
// as without KeyWait (counted, noted). The caller bounds the wait in time
// (capture: Options.KeyLogWait).
//
// # Gaps
//
// Gap(dir, n) reports n bytes of a direction lost by the capture (n < 0:
// unknown); the record they cut is dropped and Info.Decrypted is false from
// then on. A gap before the direction uses its application keys (during
// the handshake, or while its records are held for the other direction's
// hello) ends decryption of that direction, as record boundaries and
// sequence numbers are lost.
//
// A gap after that (TLS 1.3 once the direction's Finished is decrypted, TLS
// 1.2 after its ChangeCipherSpec) is resynchronised: the bytes that follow
// are scanned for a record header (application data, TLS 1.2 alerts too,
// version 0x0303, a length the suite can produce), and each candidate is
// trial-decrypted with the sequence numbers that can follow the last record
// before the gap (as many as the gap's size allows, at most 65536), and for
// TLS 1.3 under the next traffic secret as well, in case a KeyUpdate was
// lost. The AEAD tag (for CBC, the MAC) rules out a false match. The
// record that authenticates and everything after it are delivered as
// usual; what was skipped counts as lost (DirInfo.Lost, ResyncSkipped,
// LostRecords, Resyncs) and a note says where the direction
// resynchronised. If no record authenticates within about 72 KiB after
// the gap (four of the largest records), or within a bound on the trial
// decryptions (32 MiB of ciphertext per gap, tens of milliseconds, and a
// credit of 16 bytes per byte fed, so that many gaps cannot cost much
// more than the capture's decryption), the direction is given up
// (DirInfo.Stopped), with a note saying so. Two or more KeyUpdates lost in
// one gap cannot be recovered. The bytes after a gap are buffered in one
// record-sized buffer until a record authenticates (DirInfo.Resyncing).
//
// # Damage in place
//
// Bytes garbled inside a record, with none missing (a faulty middlebox, NIC
// or disk), make the record fail to authenticate, or its header make no
// sense (content type, version, length; for TLS 1.3, a plaintext record
// after the handshake). Once the direction uses its application keys and
// a record has authenticated under them, such a record is not an error:
// the direction resynchronizes from the record's first byte exactly as
// after a gap of 0 bytes (a damaged header may have given it a wrong
// length, so the bytes it seemed to span are scanned again), the record
// that authenticates next and everything after it are delivered, and what
// was skipped is counted (DirInfo.Damaged, LostRecords, ResyncSkipped,
// Lost) and noted ("record N at offset X did not authenticate …;
// resynchronized at offset Y"). A Sink that is a LossSink learns of each
// such region (Loss: where, why, records and bytes skipped, an estimate of
// the data lost) before the data after it, since no Gap call announced
// the hole. Before that point (during the handshake, or on the first
// record under the application keys, when the keys may be what is wrong)
// a record that fails is an error, as before.
//
// A burst of damage may span many records. No byte is missing, so the
// scan is not bounded by distance, as after a gap (only the trial
// decryptions are), and the chain of record lengths from the damaged
// record on tells where each following record starts and which sequence
// number it has: a record there is tried with that number alone (TLS 1.3:
// also under the next keys, in case a KeyUpdate was among the last eight
// damaged records), and one that does not authenticate is damaged too and
// the chain goes on past it. Where a header was damaged as well the chain
// breaks, and the scan goes on byte by byte; a record found so is tried
// first with the numbers around the bytes skipped over the size of the
// records just before the damage (a moving average: a burst among small
// events, or inside a large list, is like what preceded it), then over
// the direction's average record size. A region damaged in place ends at
// the first record that authenticates, however long it was.
//
// For TLS 1.3 a trial costs one block of keystream, not the record: the
// block that covers the end of the inner plaintext is decrypted, and a
// sequence number under which its last byte that is not zero padding is no
// content type is refuted (about 253 in 256 wrong ones); only the others
// are opened whole. A burst of thousands of small records followed by a
// large one (issue 34: the trials of the large record with every number it
// might have reached the bound, and the direction was lost) resynchronizes
// within the bound.
//
// # Limits and memory
//
// Record lengths are checked against MaxCiphertext13 / MaxCiphertext12
// before anything is buffered, plaintext against MaxPlaintext. Only the
// hello messages and EncryptedExtensions are buffered (bounded by the
// largest size their wire format allows, about 128 KiB); other handshake
// messages, certificates included, stream by without being kept. A Conn
// holds a record buffer (from a shared pool) only while a record is split
// across Feed calls or a direction resynchronises after a gap, and borrows
// another only while decrypting, so an idle Conn is small and the steady
// state allocates nothing per record. The KeyLog is safe for concurrent use
// and may be shared by every Conn of a capture.
package tlsdec
