// Package fromtape is the tape's answers: a request answered from the
// recording. Which recorded exchange answers it (package
// replay/internal/tape's matcher: keys, cursors, the Accept
// preference), whole or resumed after the event carrying the client's
// resourceVersion; what is synthesized from what was recorded
// (streaming lists from a LIST and the WATCH after it, LISTs from a
// streaming list, 410s for what the session does not hold, discovery
// and kube-apiserver's OpenAPI documents); a recorded body or watch
// rewritten for the world's point or transcoded into the encoding the
// client asks for (flows); and what damage lost of it, which a stream
// crosses and then ends cut.
//
// What the recording cannot answer — a watch of other parameters or from
// a resourceVersion it does not show, a GET of one object, a write of a
// read-only replay — it asks the world for (package
// replay/internal/fromworld, below it); a Live world's replay asks it
// only for what the world does not answer (Other).
//
// Contract: the Answerer decides an answer (a stream.Answer) and its
// Serve writes it through the request's stream, the body as a
// stream.Feed; it reads the session file and never writes to it.
// Everything derived from the recorded exchanges (timed writes, bodies,
// synthesized lists, heads) is built once, immutable, and shared by every
// client through a cache bounded by Options.CacheBytes. Safe for
// concurrent use (the matcher's cursors are behind a mutex).
//
// It is internal to package replay, which routes a request here unless
// a Live world answers it.
package fromtape
