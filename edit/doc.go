// Package edit makes session files from session files: Merge joins the
// parts of a rotated recording, and recordings of several apiservers,
// into one session; Slice cuts a session that stands alone out of a long
// one (a window of time, namespaces, resources, exchanges), starting the
// watches it cuts from the world as it was then; Seek is Slice for a
// replay that starts at a point of a session (wtrace replay --from).
//
// Edits stream: they read each input once, in file order, a block at a
// time, and write through a formats.FileSink (the owner of session files:
// Meta, Summary, flushing), so memory does not grow with the sessions'
// size — only with their numbers of connections and exchanges, as their
// indexes do. Slice adds, when it cuts watches, the world before its
// start (package apiserver/world loaded up to that time: every version of
// every object the session shows until then, bounded by
// SliceOptions.StateBytes), and one LIST body at a time when it filters
// a LIST's items by namespace.
//
// Records are copied as they were recorded: an edit never re-encodes an
// event or a body, and never adds what its inputs do not hold. The
// exceptions are Slice's, and say so: the LISTs and streaming lists it
// synthesizes from the world at its start (objects as recorded, in the
// recorded format), and LIST bodies of every namespace rebuilt with the
// items of the namespaces kept.
package edit
