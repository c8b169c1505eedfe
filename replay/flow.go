package replay

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/munnerz/goautoneg"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// A read-only replay (WritesReject) keeps the session's world and serves
// a recorded watch through a flow: every event it sends moves the world's
// point (world.Store.ObserveN); when the client asked for another
// encoding, the stream goes out event by event, each transcoded
// (codec.Writer).

// flow is one recorded watch stream served with the world. It belongs to
// the request's handler goroutine.
type flow struct {
	s      *Server
	x      *tape.Exchange
	format frame.Format  // the recorded stream's
	w      *codec.Writer // transcodes every event (nil: the recorded encoding)
	media  codec.Media   // what the client gets
	// switched says why the stream went event by event ("" while it
	// goes as recorded): "rv", or the transcoding.
	switched string
	pending  tape.Write // the recorded write waiting for its time, if waiting
	waiting  bool
	writes   int // clients' writes sent
}

// negotiate decides how a recorded response in format f (a body of target
// t, or a watch) goes to the client of q: as recorded, or transcoded into
// m. A client gets the encoding its Accept header asks for first, except
// that a recorded body in a format the header names plainly (without a
// transformation) goes out as recorded: a protobuf client that also
// accepts JSON gets the JSON recording byte for byte, a client that
// accepts CBOR the CBOR recording. A CBOR recording goes to any other
// client transcoded (codec decodes CBOR); nothing is transcoded into CBOR
// (codec.Negotiate offers what v1.33 does without CBORServingAndStorage):
// a client that accepts CBOR alone gets 406 for a JSON or protobuf
// recording. Without a world, or for a kind the replay does not know,
// everything goes as recorded.
func (s *Server) negotiate(q tape.Query, t codec.Target, f frame.Format) (m codec.Media, transcode bool, err error) {
	if s.store == nil || f == frame.Unknown {
		return m, false, nil
	}
	if f == frame.CBOR && acceptsPlain(q.Accept, f) {
		return m, false, nil
	}
	gvk := s.gvkOf(q.Path)
	if gvk.Empty() {
		return m, false, nil
	}
	m, err = codec.Negotiate(q.Accept, t, gvk)
	if err != nil {
		if acceptsPlain(q.Accept, f) {
			return m, false, nil
		}
		return m, false, err
	}
	if m.As == "" && !m.YAML && m.Format == f || m.As == "" && acceptsPlain(q.Accept, f) {
		return m, false, nil
	}
	return m, true, nil
}

// acceptsPlain reports whether an Accept header takes a response in
// format f as it is: a clause naming f's media type without a
// transformation (for CBOR application/cbor, or application/cbor-seq for
// a watch), or, for JSON, no header or a wildcard (the apiserver's
// default).
func acceptsPlain(accept string, f frame.Format) bool {
	if strings.TrimSpace(accept) == "" {
		return f == frame.JSON
	}
	want, also := codec.MediaJSON, ""
	switch f {
	case frame.Protobuf:
		want = codec.MediaProtobuf
	case frame.CBOR:
		want, also = codec.MediaCBOR, codec.MediaCBORSeq
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		if c.Q == 0 {
			continue
		}
		if _, ok := c.Params["as"]; ok {
			continue
		}
		mt := c.Type + "/" + c.SubType
		if mt == want || mt == also && also != "" || f == frame.JSON && (mt == "*/*" || mt == "application/*") {
			return true
		}
	}
	return false
}

// transcodeName names a transcoding for the log: "protobuf→json", "Table",
// "PartialObjectMetadata".
func transcodeName(from frame.Format, m codec.Media) string {
	if m.As != "" {
		return m.As
	}
	to := m.Format.String()
	if m.YAML {
		to = "yaml"
	}
	return from.String() + "→" + to
}

// newFlow prepares the flow of a recorded watch in format f (recorded
// exchange x, or nil for a synthesized stream) for the client of q (nil
// without a world). from is the served resourceVersion the client's view
// starts at ("" for now), where a Follow starts.
func (s *Server) newFlow(r *http.Request, q tape.Query, f frame.Format, x *tape.Exchange, from string) (*flow, error) {
	if s.store == nil || f == frame.Unknown {
		return nil, nil
	}
	fl := &flow{s: s, x: x, format: f, media: codec.Media{Format: f}}
	m, transcode, err := s.negotiate(q, codec.TargetWatch, f)
	if err != nil {
		return nil, err
	}
	if transcode {
		topts, err := codec.ParseTableOptions(r.URL.Query().Get("includeObject"))
		if err != nil {
			return nil, err
		}
		fl.w, fl.media, fl.switched = codec.NewWriter(m, topts, s.clock.Now), m, transcodeName(f, m)
	}
	return fl, nil
}

// head is the response head of the flow's stream.
func (s *Server) watchHead(x *tape.Exchange, fl *flow) *head {
	if fl != nil && fl.w != nil {
		h := responseHeader(x.Info.Response.Header, false)
		h.Set("Content-Type", fl.media.ContentType(codec.TargetWatch))
		return newHead(http.StatusOK, h)
	}
	return s.rec.headOf(x, http.StatusOK)
}

// runFlow is runFrom for a recorded watch served with the world
// (st.flow): the reader's writes on the timeline of base. Recorded
// chunks go out as they are while their resourceVersions are served
// unchanged; from the first event that must be rewritten, or from the
// start when transcoding, event by event.
//
// It reads through *rdp, which it replaces when it goes event by event,
// resumably: when the stream parks (see waitUntil) it returns false with
// the next write unread.
func (st *streamer) runFlow(rdp **writeReader, base int64) bool {
	fl := st.flow
	store := st.s.store
	rd := *rdp
	defer func() { fl.waiting = false; *rdp = rd }()
	for {
		if st.inSched && !rd.nonBlocking() {
			st.yield()
			return false
		}
		w, ok := rd.next()
		if !ok {
			return st.stopped == ""
		}
		fl.pending, fl.waiting = w, true
		if !st.waitUntil(st.deadline(w.At, base)) {
			if st.parked {
				rd.unread(w)
			}
			return false
		}
		if w.Event {
			st.wrote(&w, base, st.s.clock.Now())
			if !st.sendEvent(w.Data) {
				return false
			}
			continue
		}
		if w.RV != 0 && store.ObserveN(w.RV) != w.RV && w.EvOff >= w.Off {
			// Clients' writes took the numbers this write carries: the
			// rest goes event by event, rewritten.
			if n := w.EvOff - w.Off; n > 0 && !st.send(w.Data[:n]) {
				return false
			}
			rd = st.reader(tape.NewEventSource(st.s.file, fl.x, w.EvOff), 0)
			if fl.switched == "" {
				fl.switched = "rv"
			}
			continue
		}
		batch := append(st.batch[:0], w.Data)
		st.exts = append(st.exts[:0], w.Ext)
		size := len(w.Data)
		last := w
		now := st.s.clock.Now()
		st.wrote(&w, base, now)
		for size < maxBatch {
			w2, ok := rd.next()
			if !ok {
				if st.stopped != "" {
					return false
				}
				break
			}
			if w2.Event || st.deadline(w2.At, base).After(now) || w2.RV != 0 && store.ObserveN(w2.RV) != w2.RV {
				rd.unread(w2)
				break
			}
			st.wrote(&w2, base, now)
			batch = append(batch, w2.Data)
			st.exts = append(st.exts, w2.Ext)
			size += len(w2.Data)
			last = w2
		}
		st.batch = batch[:0]
		if !st.sendBatch(batch) {
			return false
		}
		st.midEvent = last.Cut
	}
}

// sendEvent sends one recorded event's exact bytes, with its served
// resourceVersion and in the client's encoding.
func (st *streamer) sendEvent(data []byte) bool {
	fl := st.flow
	out := data
	m, perr := frame.Peek(fl.format, data)
	if n, ok := tape.RVNumber(m.ResourceVersion); perr == nil && ok && st.s.store.ObserveN(n) != n {
		// Shifted by the clients' writes: rewritten (ServeEvent observes
		// it again, which changes nothing).
		if b, _, err := st.s.store.ServeEvent(fl.format, data); err == nil {
			out = b
			m, perr = frame.Peek(fl.format, out)
		}
	}
	if fl.w != nil {
		av, kind, raw, err := frame.EventObject(fl.format, out)
		if err == nil && perr == nil {
			out, err = fl.w.Event(m.Type, codec.Object{Format: fl.format, APIVersion: av, Kind: kind, Raw: raw})
		}
		if err != nil {
			st.s.log.Warn("replay: cannot transcode an event; skipped", "exchange", fl.x.ID, "err", err)
			return true
		}
	}
	if !st.send(codec.FrameEvent(fl.media.Format, out)) {
		return false
	}
	st.midEvent = false
	return true
}

// waitOr waits for the clock to reach t, or for wake. woke says wake came
// first; ok is false when the client's timeoutSeconds passed (stopped =
// "timeout") or the request was cancelled (stopped = "cancelled").
func (st *streamer) waitOr(t time.Time, wake <-chan struct{}) (woke, ok bool) {
	limit := t
	timeout := false
	if !st.timeoutAt.IsZero() && !st.timeoutAt.After(t) {
		limit, timeout = st.timeoutAt, true
	}
	if d := limit.Sub(st.s.clock.Now()); d > 0 {
		if st.timer == nil {
			st.timer = st.s.clock.NewTimer(d)
		} else {
			st.timer.Reset(d)
		}
		select {
		case <-st.timer.C():
		case <-wake:
			st.timer.Stop()
			return true, true
		case <-st.ctx.Done():
			st.timer.Stop()
			st.stopped = "cancelled"
			return false, false
		}
	} else if st.ctx.Err() != nil {
		st.stopped = "cancelled"
		return false, false
	}
	if timeout {
		st.stopped = "timeout"
		return false, false
	}
	return false, true
}

// storeWatchRoute answers a watch from the world: every watch of a replay
// that answers writes; for a tape, one the session did not record with
// these parameters, or one resumed from a resourceVersion the recording
// does not show.
func (s *Server) storeWatchRoute(r *http.Request, q tape.Query) route {
	req := stateRequest(r, q, nil)
	req.RecordedOnly = !s.causal()
	wt, refused := s.store.Watch(req)
	if refused != nil {
		return storeRoute(refused)
	}
	if wt == nil {
		return s.notFound(q)
	}
	return route{how: world.HowWatch, status: http.StatusOK, serve: func(st *streamer, r *http.Request) {
		s.serveStoreWatch(st, wt)
	}}
}

// serveStoreWatch sends a watch of the world: its initial events at once,
// then each recorded change at its recorded offset from the watch's start
// (scaled by Speed) and each client's write as it lands, in served
// resourceVersion order, until the client's timeoutSeconds, the client
// leaves, or Close.
func (s *Server) serveStoreWatch(st *streamer, wt *world.Watch) {
	h := http.Header{"Content-Type": {wt.ContentType()}}
	for _, w := range wt.Warnings() {
		h.Add("Warning", world.WarningHeader(w))
	}
	if !st.begin(newHead(http.StatusOK, h)) {
		return
	}
	if init := wt.Initial(); len(init) > 0 {
		if !st.sendBatch(init) {
			return
		}
		st.sentEvents(len(init), 0, 0, time.Time{})
	}
	if wt.Expired() {
		return
	}
	s.deliv.add(wt)
	st.startBookmarks(wt)
	if st.own != nil && st.own.park {
		// On the scheduler's path (see worldwatch.go).
		s.waker.add(st)
		st.release = func() {
			s.waker.remove(st)
			s.deliv.remove(wt)
		}
		st.runRest((&storeWatchCont{st: st, wt: wt}).step)
		return
	}
	defer s.deliv.remove(wt)
	forever := st.s.clock.Now().Add(100 * 365 * 24 * time.Hour)
	for {
		changed := s.store.Changed()
		next, pending, more, ok := st.sendDue(wt)
		switch {
		case !ok:
			return
		case pending:
			if _, ok := st.waitOr(st.wakeAt(st.deadline(next.Time, wt.Origin())), changed); !ok {
				return
			}
		case !more:
			s.deliv.caughtUp()
			if _, ok := st.waitOr(st.wakeAt(forever), changed); !ok {
				return
			}
		}
	}
}

// sendDue sends world watch wt's events that are due now in one batch
// (each its own chunk): the clients' writes and the recorded changes
// whose time has come, in served order. It returns the next event when
// one is left that is not due yet (pending); more when the batch reached
// maxBatch bytes and more may be due (neither: the watch has sent all it
// has, for now); ok false when the stream ends: the client is gone, or
// the watch's last event (410 Expired) went out. An event that cannot be
// encoded is logged and skipped.
func (st *streamer) sendDue(wt *world.Watch) (next world.WatchEvent, pending, more, ok bool) {
	now := st.s.clock.Now()
	batch := st.dueBookmark(wt, now, st.batch[:0])
	size := 0
	var at int64
	end := false
	for !end {
		if size >= maxBatch {
			more = true
			break
		}
		ev, found := wt.Next()
		if !found {
			break
		}
		if ev.Time != 0 && st.deadline(ev.Time, wt.Origin()).After(now) {
			next, pending = ev, true
			break
		}
		b, err := wt.Take(ev)
		if err != nil {
			st.s.log.Warn("replay: cannot encode a watch event", "err", err)
			continue
		}
		batch = append(batch, b)
		size += len(b)
		if ev.Time != 0 {
			at = ev.Time
		}
		end = ev.Expired
	}
	n := len(batch)
	if n == 0 {
		return next, pending, more, true
	}
	written := st.sendBatch(batch) // what the client did not take at once is copied (ownConn.pend)
	clear(batch)                   // the events are shared with other watches: not kept past the send
	st.batch = batch[:0]
	if !written || end {
		return next, pending, more, false
	}
	st.sentEvents(n, at, wt.Origin(), now)
	return next, pending, more, true
}

// recordedRoute answers with recorded opaque exchange x (a GET, a LIST, a
// write's answer): byte for byte when the client accepts its encoding and
// the resourceVersions it carries go out unchanged, else decoded, its
// resourceVersions rewritten (world.Store.ServeList, ServeObject) and
// encoded as the client asks.
func (s *Server) recordedRoute(r *http.Request, q tape.Query, x *tape.Exchange) route {
	if s.store == nil || x.Format != frame.Unknown {
		return s.full(x)
	}
	resp := x.Info.Response
	f := bodyFormatOf(x)
	if resp.Status < 200 || resp.Status > 299 || x.EndStatus() != formats.EndComplete || f == frame.Unknown {
		return s.full(x)
	}
	target := codec.TargetObject
	if q.Method == http.MethodGet && discovery.IsCollection(q.Path) {
		target = codec.TargetList
	}
	m, transcode, err := s.negotiate(q, target, f)
	if err != nil {
		return storeRoute(s.statusResponse(q, err))
	}
	rv, err := s.rec.bodyRV(x, target)
	if err != nil {
		return s.full(x)
	}
	if !transcode && (rv == 0 || s.store.ObserveN(rv) == rv) {
		return s.full(x)
	}
	rt := route{how: howRecorded, x: x, status: responseStatus(resp.Status), transcoded: "rv"}
	if transcode {
		rt.transcoded = transcodeName(f, m)
	}
	rt.serve = func(st *streamer, r *http.Request) {
		if err := s.serveRewritten(st, r, x, f, target, m, transcode); err != nil {
			s.log.Warn("replay: cannot rewrite a recorded body", "exchange", x.ID, "err", err)
			writeStatus(st.w, http.StatusInternalServerError, "InternalError", err.Error())
		}
	}
	return rt
}

// statusResponse is a store-like response carrying err's Status.
func (s *Server) statusResponse(q tape.Query, err error) *world.Response {
	st := codec.StatusOf(err)
	m := codec.StatusMedia(q.Accept)
	return &world.Response{Code: int(st.Code), ContentType: m.ContentType(codec.TargetObject),
		Body: codec.StatusBody(m, st), How: howNotAcceptable}
}

// bodyFormatOf is the format of an opaque body from its Content-Type:
// JSON, protobuf or CBOR, else Unknown.
func bodyFormatOf(x *tape.Exchange) frame.Format {
	switch {
	case x.Media == codec.MediaJSON:
		return frame.JSON
	case x.Media == codec.MediaProtobuf:
		return frame.Protobuf
	case x.Media == codec.MediaCBOR:
		return frame.CBOR
	}
	return frame.Unknown
}

// serveRewritten sends recorded body x with its served resourceVersions,
// transcoded into m if transcode.
func (s *Server) serveRewritten(st *streamer, r *http.Request, x *tape.Exchange, f frame.Format, t codec.Target, m codec.Media, transcode bool) error {
	b, err := s.rec.readBody(x)
	if err != nil {
		return err
	}
	if t == codec.TargetList {
		b, _, err = s.store.ServeList(f, b)
	} else {
		b, _, err = s.store.ServeObject(f, b)
	}
	if err != nil {
		return err
	}
	ct := ""
	if transcode {
		topts, err := codec.ParseTableOptions(r.URL.Query().Get("includeObject"))
		if err != nil {
			return err
		}
		w := codec.NewWriter(m, topts, s.clock.Now)
		if t == codec.TargetList {
			l, err := frame.ListItems(f, b)
			if err != nil {
				return err
			}
			kind := strings.TrimSuffix(l.Kind, "List")
			items := make([]codec.Object, len(l.Items))
			for i, it := range l.Items {
				items[i] = codec.Object{Format: f, APIVersion: l.APIVersion, Kind: kind, Raw: it}
			}
			b, err = w.List(l.APIVersion, kind, codec.ListMeta{ResourceVersion: l.ResourceVersion, Continue: l.Continue}, items)
			if err != nil {
				return err
			}
		} else {
			o, err := codec.FromBody(f, b)
			if err != nil {
				return err
			}
			if b, err = w.Object(o); err != nil {
				return err
			}
		}
		ct = m.ContentType(t)
	}
	h := st.w.Header()
	for k, v := range responseHeader(x.Info.Response.Header, false) {
		h[k] = v
	}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	st.w.WriteHeader(responseStatus(x.Info.Response.Status))
	if r.Method != http.MethodHead {
		st.send(b)
	}
	return nil
}

// synthWatchListFits reports whether a streaming list built from recorded
// LIST lst (and the recorded WATCH after it) can go to the client of q:
// in an encoding it accepts, and with the LIST's resourceVersion served
// unchanged. Otherwise the world answers.
func (s *Server) synthWatchListFits(q tape.Query, lst *tape.Exchange) bool {
	if _, transcode, err := s.negotiate(q, codec.TargetWatch, lst.ListFormat()); err != nil || transcode {
		return false
	}
	sl, err := s.rec.synthList(lst)
	if err != nil {
		return true // served as before: the error is reported then
	}
	n, ok := tape.RVNumber(sl.rv)
	return !ok || s.store.ObserveN(n) == n
}

// listFromWatchFits is synthWatchListFits for a LIST built from recorded
// streaming list x.
func (s *Server) listFromWatchFits(q tape.Query, x *tape.Exchange) bool {
	if _, transcode, err := s.negotiate(q, codec.TargetList, x.Format); err != nil || transcode {
		return false
	}
	l, err := s.rec.listFromWatch(x)
	if err != nil {
		return true
	}
	n, ok := tape.RVNumber(l.rv)
	return !ok || s.store.ObserveN(n) == n
}
