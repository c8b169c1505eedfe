package stream

import (
	"net/http"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// EndsClean reports whether stream st, whose handler is about to return,
// ends cleanly (terminating chunk, END_STREAM): it ended as recorded, at
// the client's timeoutSeconds, or was cancelled by Shutdown.
func (st *Stream) EndsClean() bool {
	return st.stopped == "" || st.stopped == "timeout" ||
		st.stopped == "cancelled" && st.hub.draining.Load()
}

// Hub is the stream's hub.
func (st *Stream) Hub() *Hub { return st.hub }

// Method is the request's method.
func (st *Stream) Method() string { return st.method }

// Arrival is when the request arrived, on the hub's clock.
func (st *Stream) Arrival() time.Time { return st.arrival }

// Bytes and Writes count what the stream sent: bytes, and chunks (or
// writes through net/http).
func (st *Stream) Bytes() int64 { return st.bytes }

func (st *Stream) Writes() int64 { return st.writes }

// Header is the response's header fields, to set before WriteHeader (a
// response through net/http).
func (st *Stream) Header() http.Header { return st.w.Header() }

// WriteHeader sends the response head through net/http.
func (st *Stream) WriteHeader(code int) { st.w.WriteHeader(code) }

// Status answers with a failure Status (JSON) through net/http.
func (st *Stream) Status(code int, reason, msg string) { WriteStatus(st.w, code, reason, msg) }

// Stopped says why the stream stopped early: "" while it has not,
// "timeout" at the client's timeoutSeconds, "cancelled", or what failed.
func (st *Stream) Stopped() string { return st.stopped }

// Stop stops the stream early, for reason why (what failed: reading the
// session, decoding its body): it ends cut (see EndsClean).
func (st *Stream) Stop(why string) { st.stopped = why }

// Crossed reports whether the stream went past data lost to damage (see
// Cross).
func (st *Stream) Crossed() bool { return len(st.crossed) > 0 }

// InSched reports whether the scheduler runs the stream's rest (see
// RunRest): it must not block, and Yield where it would.
func (st *Stream) InSched() bool { return st.inSched }

// Parked reports whether the stream parked where it waited (see
// WaitUntil): its body returns at once, to be run again (RunRest).
func (st *Stream) Parked() bool { return st.parked }

// Parks reports whether the stream is on the scheduler's path: it parks
// where it would wait, and a Waker wakes it (see sched.go).
func (st *Stream) Parks() bool { return st.own != nil && st.own.park }

// OnRelease sets f, called once when the stream ends (what its rest
// holds, beyond the body that set it).
func (st *Stream) OnRelease(f func()) { st.release = f }

// Shift moves the stream's timeline d later (a loop pass).
func (st *Stream) Shift(d time.Duration) { st.shift += d }

// SetRecordedEnd gives the stream its recorded end, whose last-chunk
// extensions and trailer fields it ends with when it ends as recorded.
func (st *Stream) SetRecordedEnd(e *formats.End) { st.recEnd = e }

// Transcoded says why a stream that began as recorded went otherwise;
// SetTranscoded sets it.
func (st *Stream) Transcoded() string { return st.transcoded }

func (st *Stream) SetTranscoded(why string) { st.transcoded = why }

// ResponseWriter is the response's writer through net/http, for an
// answer written in one piece (a document); a stream that took its
// connection over has none.
func (st *Stream) ResponseWriter() http.ResponseWriter { return st.w }

// TimeoutAt is when the client's timeoutSeconds ends the stream, in
// replay time (zero: never).
func (st *Stream) TimeoutAt() time.Time { return st.timeoutAt }
