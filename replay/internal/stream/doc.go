// Package stream is how a replay writes one answer with its timing: a
// Stream takes an HTTP/1.1 watch's connection over from net/http (Begin:
// it writes the chunked framing itself, each chunk with its recorded
// extensions, and ends with the recorded last-chunk and trailers),
// sends (Send, SendBatch: the chunks due together in one writev), waits
// (WaitUntil: the client's timeoutSeconds, the client leaving, Close;
// on the scheduler's path it parks instead, see package
// replay/internal/pace) and ends (Finish as recorded — clean, FIN, RST,
// held open — or cut after data lost to damage). Play is the one
// batching loop of every stream: a Feed (a recorded exchange, one served
// with the world, a watch of the world) says what is due when; Play
// waits for it and sends what is due together in one batch.
//
// A Hub is what the streams of one server share (the clock and speed,
// the write timeout, the log and metrics, the schedulers, the
// connections waiting in reads); Hub.Serve runs an Answer (what an
// answerer of the tape or the world decided) on a stream, on the
// request's goroutine or, for a watch over HTTP/1.1, on one of its own
// that lets net/http's go.
//
// Contract: a Stream belongs to the goroutine serving it (the
// scheduler's while parked); nothing on its write path is shared with
// other requests but immutable data, and a Write's Data is not kept past
// the send. Every blocking write has the Hub's write timeout; every wait
// also ends with the request's context. It knows nothing of sessions,
// tapes or worlds: their answers come to it as Answers and Feeds.
//
// It is internal to package replay, whose answerers (routes of the tape
// and of the world) hand it their answers.
package stream
