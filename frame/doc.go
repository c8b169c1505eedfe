// Package frame splits Kubernetes watch response bodies into events and
// reads event metadata without decoding whole objects. It keeps every
// event's exact bytes: nothing is re-marshalled.
//
// # Formats
//
// A JSON watch body (Content-Type application/json on a watch request) is
// a stream of JSON objects; the apiserver writes each event compact, then
// "\n". An event's exact bytes are the object's text from '{' to its
// matching '}'. A protobuf watch body
// (application/vnd.kubernetes.protobuf;stream=watch) is a sequence of
// frames, each a 4-byte big-endian length then a metav1.WatchEvent; an
// event's exact bytes are the frame payload. A CBOR watch body
// (application/cbor-seq, RFC 8742; Kubernetes 1.32+ with the
// CBORServingAndStorage gate, clients that prefer CBOR) is a sequence of
// data items, each a WatchEvent map enclosed in the self-described CBOR
// tag (d9 d9 f7); an event's exact bytes are the item without that tag,
// as client-go's frame reader hands it to its decoder, and the tag is its
// Pre. FormatOf picks the format from the response headers, Sniff from
// bytes captured mid-body.
//
// # Splitting
//
// A Splitter is fed the body in pieces of any size (TCP segments, HTTP
// chunks, single bytes) and reports events:
//
//	s := frame.NewSplitter(frame.JSON, frame.Options{})
//	for len(p) > 0 {
//		n, ev, ok, err := s.Next(p)
//		p = p[n:]
//		if err != nil {
//			// *frame.Error: offset + ErrSyntax or ErrTooLarge; sticky until s.Resync()
//		}
//		if ok {
//			// ev.Pre, ev.Data alias p or s's buffer: copy what you keep
//		}
//	}
//	tail, err := s.End() // err wraps ErrTruncated if the body cut an event
//
// Each event carries Pre, the bytes between the previous event and Data
// (JSON whitespace, the protobuf length prefix, the CBOR self-described
// tag), and Offset, the body offset of its first byte. For a body split
// without error,
//
//	body == Pre₀ + Data₀ + Pre₁ + Data₁ + … + tail
//
// and Offset advances accordingly. After Resync, bytes skipped before the
// next event start are counted by Skipped instead:
// consumed == Σ(len(Pre)+len(Data)) + Skipped + len(tail).
//
// # Resync
//
// A body captured from its middle, or one with a gap, cannot be split from
// an arbitrary byte: Options.Resync (or Resync after an error or gap) makes
// the Splitter skip to a point where an event clearly begins. JSON: a '{'
// at a line start followed by `"type":"` and one of ADDED, MODIFIED,
// DELETED, BOOKMARK, ERROR and '"' (`{"type":"` alone also occurs inside
// objects, hence the line anchor; the apiserver's compact JSON has no raw
// newline inside an event). Protobuf: a length 1..limit whose payload is a
// WatchEvent type field holding one of the five types, then an object
// field and a RawExtension raw field whose lengths match the frame exactly,
// then the "k8s\x00" envelope magic. CBOR: the self-described tag and a
// map of two pairs, then either the key "type", one of the five types and
// the key "object", or the key "object" and the start of a map (the
// apiserver writes the two members in either order). SetOffset lets the
// caller keep offsets as body offsets across a gap of known size.
//
// # Metadata and lists
//
// Peek reads type, kind, apiVersion, namespace, name, resourceVersion, the
// initial-events-end annotation and, for ERROR events, the Status code,
// reason and message, in one walk with internal/jsonscan (skipping
// everything else; four times json-iterator's Iterator's speed on real
// watch events, which it replaced), protowire or internal/cborscan;
// PeekEvent reads the same Meta and the object's exact bytes in that one
// walk. A Table (kubectl get -w asks for
// application/json;as=Table) keeps kind Table, with the namespace, name
// and resourceVersion of its row's object; a PartialObjectMetadata
// (metadata-only informers) is read like any object. ListItems splits a
// LIST body into its items' exact bytes; WatchEvent, Bookmark, BuildList
// and EventObject build and take apart events and lists the way the
// apiserver writes them, for replay; AppendEvent frames an event as its
// stream carries it.
//
// # Limits
//
// One event's Data is at most MaxEventSize (16 MiB, Kubernetes' own frame
// limit) or Options.MaxEventSize; a protobuf length is checked before
// anything is buffered, a JSON event is never buffered past the limit, and
// every CBOR length and count is checked against the room left before its
// bytes are read (each owed item takes at least a byte); CBOR
// indefinite-length items nest at most cborscan.MaxDepth deep.
// JSON whitespace between two events is bounded at 64 KiB. The JSON walker
// behind ListItems, WatchEvent and EventObject bounds nesting at 10000, as
// encoding/json does.
//
// # Concurrency
//
// A Splitter is not safe for concurrent use. The package-level functions
// are safe for concurrent use and never panic on any input.
package frame
