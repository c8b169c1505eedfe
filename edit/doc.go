// Package edit makes session files from session files: Merge joins the
// parts of a rotated recording, and recordings of several apiservers,
// into one session.
//
// Edits stream: they read each input once, in file order, a block at a
// time, and write through a capture.FileSink (the owner of session files:
// Meta, Summary, flushing), so memory does not grow with the sessions'
// size — only with their numbers of connections and exchanges, as their
// indexes do.
//
// Records are copied as they were recorded: an edit never re-encodes an
// event or a body, and never adds what its inputs do not hold.
package edit
