// Package tape is how a replay chooses and reads recorded answers: the
// session's exchanges indexed by the request they answer (Matcher, Query,
// Exchange; the preference by Accept header), each exchange's body cut into
// timed writes (Write, Plan, Source: a cached plan, or streamed from the
// file by a producer or event by event), the watch events a client can
// resume after (Mark), and what a damaged session file lost (Loss,
// FindLosses).
//
// Contract: everything here reads the session file (formats.File) and
// never writes to it or to a client; a Plan, its Writes' data and an
// Exchange are immutable once built and may be shared by every client. A
// Matcher's cursors are not guarded: the caller holds its lock around
// Pick. A Source is used by one goroutine at a time. Parsers of what a
// client sends (ParseTarget) bound lengths before allocating and never
// panic.
//
// It is internal to package replay, which decides which exchange answers
// a request (replay/route.go) and writes it with its timing.
package tape
