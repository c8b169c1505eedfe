// Package chunked decodes the HTTP/1.1 chunked transfer coding (RFC 9112
// §7.1) incrementally, for bodies recovered from reassembled TCP streams.
//
// # Decoder
//
// [Decoder] is push-based: the caller hands it whatever bytes it has (a TCP
// segment, one byte, 64 KiB) together with their capture time and loops:
//
//	for len(p) > 0 {
//		n, tok, err := d.Next(p, t)
//		if err != nil {
//			return err // *Error, sticky
//		}
//		p = p[n:]
//		switch tok.Kind {
//		case chunked.Data: // tok.Data aliases p
//		case chunked.ChunkEnd: // tok.Chunk is complete
//		case chunked.Done: // p now holds whatever follows the body
//		}
//	}
//
// Each call consumes a prefix of p and yields at most one [Token]. For a
// body the tokens come in this order:
//
//	( ChunkStart Data+ ChunkEnd )* Trailer* Done
//
// with [None] tokens anywhere in between (bytes consumed, nothing to
// report: a partial line was buffered, a lone CR was checked). For every
// chunk of non-zero size there is exactly one ChunkStart, one or more Data
// tokens whose lengths add up to the chunk size, and one ChunkEnd. The
// last-chunk ("0" line) produces no ChunkStart or ChunkEnd: its [Chunk]
// (Size 0, its extensions and wire offset) is carried by the Done token.
//
// Times: Next is given the capture time t of the bytes in p. A ChunkStart's
// Chunk.Time is the t of the input that held the LF ending the chunk-size
// line. A ChunkEnd's Chunk.Time is the t of the input that held the LF of
// the CRLF after the chunk's data (not the time of the last data byte: the
// chunk is complete only once its CRLF arrived). Done's Chunk.Time is the t
// of the input that held the LF of the final CRLF. Data tokens carry the
// current chunk as it was at ChunkStart.
//
// Once Done has been returned, Next returns io.EOF without consuming
// anything; the bytes after the body belong to the caller.
//
// # Strictness
//
// The grammar is that of RFC 9112 §7.1 with the limits of Go's
// net/http/internal/chunked.go:
//
//   - Every line ends in CRLF. A bare LF, or a CR anywhere else in a line,
//     is an error: RFC 9112 §2.2 lets recipients accept a bare LF in the
//     message head, but not inside chunked framing (erratum 7633 rejected
//     the clarification that would have allowed it), exactly like net/http.
//   - chunk-size is 1 to 16 hex digits (more digits are [ErrChunkTooLarge]
//     even when they are leading zeros, like net/http) and at most
//     [MaxChunkSize].
//   - chunk-ext is *( BWS ";" BWS name [ BWS "=" BWS ( token /
//     quoted-string ) ] ) and is checked; net/http skips extensions
//     without looking at them. Whitespace at the very end of a size line
//     is accepted, as net/http does. Whitespace before the first ";" is
//     accepted (it is RFC 9112 BWS), which net/http rejects.
//   - A line, CRLF included, is at most [MaxLineLength] bytes.
//   - Framing overhead is budgeted like net/http (see [MaxOverhead]);
//     trailer lines count against the same budget.
//   - The trailer section is field lines "name: value" (RFC 9112 §5, §7.1.2)
//     ended by an empty line. Obsolete line folding is rejected. net/http's
//     chunked reader stops after the "0" line and never reads trailers.
//
// Errors are [*Error] values carrying the offset, in the encoded stream, of
// the byte at which the input became invalid; they wrap one of the
// sentinels [ErrMalformed], [ErrLineTooLong], [ErrChunkTooLarge] or
// [ErrOverhead].
//
// # Memory
//
// Next does not allocate per chunk: Data tokens alias the input, partial
// lines are buffered in a fixed array inside the Decoder (about 4 KiB), and
// a chunk extension allocates a string only when it differs from the
// previous chunk's extension. Trailer fields allocate their Name and Value.
//
// # Resync
//
// [Decoder.Resync] finds where chunk framing resumes in a stream whose
// capture started in the middle of a body, or after a gap. See its doc.
//
// # Concurrency
//
// A Decoder is not safe for concurrent use.
package chunked
