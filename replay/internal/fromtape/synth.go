package fromtape

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// serveSynthWatchList answers a streaming-list request (sendInitialEvents)
// that the session did not record, from a recorded LIST (all its pages) and
// the recorded WATCH that started from the LIST's resourceVersion: initial
// ADDED events, the initial-events-end bookmark, then the watch's events on
// its own timeline. Without such a watch the stream stays open after the
// bookmark.
func (a *Answerer) serveSynthWatchList(st *stream.Stream, r *http.Request, q tape.Query, lst *tape.Exchange) (watch *tape.Exchange, err error) {
	sl, err := a.rec.synthList(lst)
	if err != nil {
		return nil, err
	}
	if ws := tape.Filter(a.m.ByKey[q.Key], func(c *tape.Exchange) bool {
		return c.Q.RV == sl.rv && sl.rv != "" && c.Format == sl.format
	}); len(ws) > 0 {
		watch = tape.PreferAccepted(ws, q.Accept)[0]
	}
	var hd *stream.Head
	if watch != nil {
		hd = a.rec.headOf(watch, http.StatusOK)
	} else {
		hd = stream.NewHead(http.StatusOK, http.Header{"Content-Type": {watchContentType(sl.format)}})
	}
	if !st.Begin(hd) {
		return watch, nil
	}
	if !st.Play(&tapeFeed{rd: a.reader(st, &tape.PlanSource{Plan: &tape.Plan{Writes: sl.writes}}, 0)}, 0) {
		return watch, nil
	}
	if watch == nil {
		st.RunRest(st.Hold)
		return nil, nil
	}
	// With a world, the rest is a flow (the LIST's encoding was one the
	// client accepts: see synthWatchListFits).
	fl, err := a.newFlow(r, q, sl.format, watch, sl.rv)
	if err != nil {
		fl = nil
	}
	a.continueWatch(st, watch, fl, 0, watch.RespTime())
	return watch, nil
}

func watchContentType(f frame.Format) string {
	switch f {
	case frame.Protobuf:
		return "application/vnd.kubernetes.protobuf;stream=watch"
	case frame.CBOR:
		return "application/cbor-seq"
	}
	return "application/json"
}

// continueWatch sends a watch exchange's body after the head was sent (by
// a synthesized prefix), from body offset skip on the timeline of base,
// resumably (see runRest): the caller returns at once after it.
func (a *Answerer) continueWatch(st *stream.Stream, x *tape.Exchange, fl *flow, skip, base int64) {
	c := &watchCont{a: a, st: st, x: x, fl: fl, skip: skip, base: base}
	st.RunRest(c.step)
}

// watchCont is where the body of a watch stream is (see continueWatch):
// a pass over the recorded exchange (several with Loop), then its end.
type watchCont struct {
	a          *Answerer
	st         *stream.Stream
	x          *tape.Exchange
	fl         *flow // served with the world (nil: as recorded)
	skip, base int64
	f          stream.Feed
	phase      int
}

const (
	wcOpen   = iota // open the next pass
	wcRun           // send the pass
	wcFinish        // end the stream as recorded
	wcDone
)

// step carries the stream on from where it is, until it parks or its body
// is done. On the scheduler (inSched) it goes no further than sending
// from memory: past that it yields to a goroutine.
func (c *watchCont) step() {
	st, a, x := c.st, c.a, c.x
	for {
		if st.InSched() && c.phase != wcRun {
			if c.phase != wcDone {
				st.Yield()
			}
			return
		}
		switch c.phase {
		case wcOpen:
			var src tape.Source
			if c.fl != nil && c.fl.w != nil {
				src = tape.NewEventSource(a.file, x, c.skip) // transcoded: event by event
			} else {
				var err error
				if src, err = a.rec.openSource(x); err != nil {
					st.Stop("reading session: " + err.Error())
					c.phase = wcDone
					return
				}
			}
			rd := a.reader(st, src, c.skip)
			if c.fl != nil {
				c.f = &flowFeed{st: st, fl: c.fl, rd: rd}
			} else {
				c.f = &tapeFeed{rd: rd}
			}
			c.phase = wcRun
		case wcRun:
			ok := st.Play(c.f, c.base)
			if st.Parked() {
				return
			}
			switch {
			case !ok:
				c.phase = wcDone
			case !a.opts.Loop:
				c.phase = wcFinish
			default:
				st.Shift(a.hub.Scale(x.EndTime() - c.base))
				if a.speed != 0 && x.EndTime() <= x.RespTime() {
					st.Shift(time.Millisecond)
				}
				c.base, c.skip, c.phase = x.RespTime(), 0, wcOpen
			}
		case wcFinish:
			st.Finish(endOf(x), x.EndTime(), c.base)
			if !st.Parked() {
				c.phase = wcDone
			}
			return
		default:
			return
		}
	}
}

// serveListFromWatch answers a LIST the session did not record from the
// initial events of a recorded streaming list.
func (a *Answerer) serveListFromWatch(st *stream.Stream, x *tape.Exchange) error {
	l, err := a.rec.listFromWatch(x)
	if err != nil {
		return err
	}
	h := st.Header()
	h.Set("Content-Type", l.contentType)
	h.Set("Content-Length", strconv.Itoa(len(l.body)))
	st.WriteHeader(http.StatusOK)
	st.Send(l.body)
	return nil
}

// serveExpired answers a watch from a resourceVersion the session does not
// hold with what the apiserver sends for one it compacted away: a 200 watch
// stream with one ERROR event carrying a 410 Expired Status (always JSON,
// which every client decodes from the Content-Type), then a clean end. The
// client relists.
func (a *Answerer) serveExpired(st *stream.Stream, rv string) {
	msg := "too old resource version: " + rv + " (not in the replayed session)"
	var b bytes.Buffer
	b.WriteString(`{"type":"ERROR","object":`)
	b.Write(stream.StatusJSON(http.StatusGone, "Expired", msg))
	b.WriteString("}\n")
	st.Header().Set("Content-Type", "application/json")
	st.WriteHeader(http.StatusOK)
	st.Send(b.Bytes())
}

// serveEmptyWatch answers a watch that is past the session's last event
// with an open stream that sends nothing, as a quiet apiserver does, until
// the client's timeoutSeconds (then a clean end), the client leaves, or
// Close. Headers come from x when there is one.
func (a *Answerer) serveEmptyWatch(st *stream.Stream, x *tape.Exchange, fl *flow) {
	hd := stream.NewHead(http.StatusOK, http.Header{"Content-Type": {"application/json"}})
	if x != nil {
		hd = a.watchHead(x, fl)
	}
	if st.Begin(hd) {
		st.RunRest(st.Hold)
	}
}
