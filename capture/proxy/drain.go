package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/wtrace/wtrace/frame"
)

// How a proxied watch ends when the proxy shuts down (Shutdown): as
// wtrace replay and kube-apiserver end theirs, cleanly — over HTTP/1.1
// the terminating chunk, over HTTP/2 END_STREAM — and never inside an
// event, so that the client sees a watch that ended and re-watches
// (elsewhere), not a broken stream, and the recording holds an exchange
// that ended cleanly after its last whole event.
//
// Each watch's upstream body is read through a drainBody, which follows
// the event framing of the stream (package frame's Splitter: JSON,
// protobuf, CBOR) and so knows whether what the client was sent ends
// between two events. When the proxy drains:
//
//   - between events, the upstream request is cancelled at once and the
//     body reports io.EOF: the handler returns and net/http ends the
//     response cleanly;
//   - inside an event, the rest of that event is read and sent, then the
//     body reports io.EOF;
//   - a watch whose response head has not arrived is cancelled and
//     answered 503 ServiceUnavailable with a Kubernetes Status;
//   - a body that is not a stream of events (an error Status answering a
//     watch request) ends on its own;
//   - a stream whose framing could not be followed (malformed, an event
//     over frame.MaxEventSize) is cut as before: a clean end after bytes
//     of unknown shape would tell the client it got whole events.
//
// Shutdown's context bounds the whole: what has not ended by then is cut.

// drainKey is the context key of a watch request's drainBody.
type drainKey struct{}

// drainBody is a watch's upstream body, read by httputil.ReverseProxy,
// that ends at an event boundary once the proxy drains. Read is called by
// the handler's goroutine only; drain by Shutdown's.
type drainBody struct {
	cancel context.CancelFunc // the upstream request's

	mu       sync.Mutex
	draining bool
	head     bool            // the response head arrived (follow was called)
	body     io.ReadCloser   // upstream's; nil until the head arrived
	sp       *frame.Splitter // nil: not a stream of events
	json     bool            // whitespace between events does not count as an event begun
	lost     bool            // the framing could not be followed
	partial  bool            // the client was sent part of an event
	off      int64           // body bytes fed to sp
}

// follow takes over res's body when it is a stream of watch events.
func (d *drainBody) follow(res *http.Response) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.head = true
	f := frame.ResponseFormat(res.StatusCode, res.Header.Get("Content-Type"), true)
	switch f {
	case frame.JSON, frame.Protobuf, frame.CBOR:
	default:
		return // an opaque body: it ends on its own
	}
	d.sp = frame.NewSplitter(f, frame.Options{})
	d.json = f == frame.JSON
	d.body = res.Body
	res.Body = d
}

// drain asks the watch to end at its next event boundary.
func (d *drainBody) drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	switch {
	case !d.head, d.lost, d.sp != nil && !d.partial:
		d.cancel()
	}
}

// errDraining is what a drained watch's upstream request fails with
// before its response head arrived.
var errDraining = errors.New("proxy: shutting down")

func (d *drainBody) Read(p []byte) (int, error) {
	d.mu.Lock()
	if d.draining && !d.partial && !d.lost {
		d.mu.Unlock()
		return 0, io.EOF
	}
	d.mu.Unlock()
	n, err := d.body.Read(p)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining && !d.partial && !d.lost {
		return 0, io.EOF // what came meanwhile begins an event the client never sees
	}
	if d.lost {
		return n, err
	}
	wasPartial := d.partial
	first := d.feed(p[:n])
	if d.draining && wasPartial && first >= 0 {
		d.partial = false
		return first, nil // the event completed: the next Read ends the body
	}
	return n, err
}

// feed follows the framing over b and returns the index in b just past
// the first event completed in it (-1 if none). It sets partial: whether
// the bytes sent so far end inside an event.
func (d *drainBody) feed(b []byte) (first int) {
	first = -1
	base := d.off
	d.off += int64(len(b))
	rest := 0 // index in b of the first byte past the last completed event
	for i := 0; i < len(b); {
		n, ev, ok, err := d.sp.Next(b[i:])
		i += n
		if err != nil {
			d.lost = true
			if d.draining {
				d.cancel()
			}
			return -1
		}
		if !ok {
			continue
		}
		end := int(ev.Offset + int64(len(ev.Pre)+len(ev.Data)) - base)
		if end >= 0 && end <= len(b) {
			if first < 0 {
				first = end
			}
			rest = end
		} else if end > len(b) {
			rest = len(b)
		}
		d.partial = false
	}
	for _, c := range b[rest:] {
		if !d.json || c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			d.partial = true
			break
		}
	}
	return first
}

func (d *drainBody) Close() error {
	d.cancel()
	return d.body.Close()
}
