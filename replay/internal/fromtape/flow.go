package fromtape

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/munnerz/goautoneg"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay/internal/discovery"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
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
	a      *Answerer
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
func (a *Answerer) negotiate(q tape.Query, t codec.Target, f frame.Format) (m codec.Media, transcode bool, err error) {
	if a.store == nil || f == frame.Unknown {
		return m, false, nil
	}
	if f == frame.CBOR && acceptsPlain(q.Accept, f) {
		return m, false, nil
	}
	gvk := a.gvkOf(q.Path)
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
func (a *Answerer) newFlow(r *http.Request, q tape.Query, f frame.Format, x *tape.Exchange, from string) (*flow, error) {
	if a.store == nil || f == frame.Unknown {
		return nil, nil
	}
	fl := &flow{a: a, x: x, format: f, media: codec.Media{Format: f}}
	m, transcode, err := a.negotiate(q, codec.TargetWatch, f)
	if err != nil {
		return nil, err
	}
	if transcode {
		topts, err := codec.ParseTableOptions(q.Query.Get("includeObject"))
		if err != nil {
			return nil, err
		}
		fl.w, fl.media, fl.switched = codec.NewWriter(m, topts, a.clock.Now), m, transcodeName(f, m)
	}
	return fl, nil
}

// head is the response head of the flow's stream.
func (a *Answerer) watchHead(x *tape.Exchange, fl *flow) *stream.Head {
	if fl != nil && fl.w != nil {
		h := responseHeader(x.Info.Response.Header, false)
		h.Set("Content-Type", fl.media.ContentType(codec.TargetWatch))
		return stream.NewHead(http.StatusOK, h)
	}
	return a.rec.headOf(x, http.StatusOK)
}

// flowFeed plays a recorded watch served with the world (fl): the
// reader's writes, whose recorded chunks go out as they are while their
// resourceVersions are served unchanged; from the first event that must
// be rewritten, or from the start when transcoding, event by event.
type flowFeed struct {
	st *stream.Stream
	fl *flow
	rd *writeReader // replaced by an event source when the stream goes event by event
}

func (f *flowFeed) Peek() (int64, bool) {
	w, ok := f.rd.next()
	if ok {
		f.rd.unread(w)
	}
	return w.At, ok
}

func (f *flowFeed) Take() (stream.Write, bool) {
	fl, a := f.fl, f.fl.a
	w, _ := f.rd.next()
	if w.Event {
		data, ok := fl.event(w.Data)
		return stream.Write{Data: data, Events: 1, At: w.At}, ok
	}
	if w.RV != 0 && a.store.ObserveN(w.RV) != w.RV && w.EvOff >= w.Off {
		// Clients' writes took the numbers this write carries: the
		// rest goes event by event, rewritten.
		n := w.EvOff - w.Off
		f.rd = a.reader(f.st, tape.NewEventSource(a.file, fl.x, w.EvOff), 0)
		if fl.switched == "" {
			fl.switched = "rv"
			f.st.SetTranscoded("rv")
		}
		return stream.Write{Data: w.Data[:n]}, n > 0
	}
	return recordedWrite(&w), true
}

func (f *flowFeed) Changed() <-chan struct{} { return nil }
func (f *flowFeed) Idle()                    {}
func (f *flowFeed) WakeAt() time.Time        { return time.Time{} }
func (f *flowFeed) InMemory() bool           { return f.rd.nonBlocking() }

// event is one recorded event's exact bytes as the flow sends them:
// with its served resourceVersion, in the client's encoding, framed.
// false skips an event that cannot be transcoded.
func (fl *flow) event(data []byte) ([]byte, bool) {
	store := fl.a.store
	out := data
	m, perr := frame.Peek(fl.format, data)
	if n, ok := tape.RVNumber(m.ResourceVersion); perr == nil && ok && store.ObserveN(n) != n {
		// Shifted by the clients' writes: rewritten (ServeEvent observes
		// it again, which changes nothing).
		if b, _, err := store.ServeEvent(fl.format, data); err == nil {
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
			fl.a.log.Warn("replay: cannot transcode an event; skipped", "exchange", fl.x.ID, "err", err)
			return nil, false
		}
	}
	return codec.FrameEvent(fl.media.Format, out), true
}

// recordedRoute answers with recorded opaque exchange x (a GET, a LIST, a
// write's answer): byte for byte when the client accepts its encoding and
// the resourceVersions it carries go out unchanged, else decoded, its
// resourceVersions rewritten (world.Store.ServeList, ServeObject) and
// encoded as the client asks.
func (a *Answerer) recordedRoute(r *http.Request, q tape.Query, x *tape.Exchange) *stream.Answer {
	if a.store == nil || x.Format != frame.Unknown {
		return a.full(x)
	}
	resp := x.Info.Response
	f := bodyFormatOf(x)
	if resp.Status < 200 || resp.Status > 299 || x.EndStatus() != formats.EndComplete || f == frame.Unknown {
		return a.full(x)
	}
	target := codec.TargetObject
	if q.Method == http.MethodGet && discovery.IsCollection(q.Path) {
		target = codec.TargetList
	}
	m, transcode, err := a.negotiate(q, target, f)
	if err != nil {
		return fromworld.Refuse(q, err)
	}
	rv, err := a.rec.bodyRV(x, target)
	if err != nil {
		return a.full(x)
	}
	if !transcode && (rv == 0 || a.store.ObserveN(rv) == rv) {
		return a.full(x)
	}
	rt := &stream.Answer{How: HowRecorded, Recorded: true, Exchange: x.ID, Status: responseStatus(resp.Status), Transcoded: "rv"}
	if transcode {
		rt.Transcoded = transcodeName(f, m)
	}
	rt.Serve = func(st *stream.Stream, r *http.Request) {
		if err := a.serveRewritten(st, r, q, x, f, target, m, transcode); err != nil {
			a.log.Warn("replay: cannot rewrite a recorded body", "exchange", x.ID, "err", err)
			st.Status(http.StatusInternalServerError, "InternalError", err.Error())
		}
	}
	return rt
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
func (a *Answerer) serveRewritten(st *stream.Stream, r *http.Request, q tape.Query, x *tape.Exchange, f frame.Format, t codec.Target, m codec.Media, transcode bool) error {
	b, err := a.rec.readBody(x)
	if err != nil {
		return err
	}
	if t == codec.TargetList {
		b, _, err = a.store.ServeList(f, b)
	} else {
		b, _, err = a.store.ServeObject(f, b)
	}
	if err != nil {
		return err
	}
	ct := ""
	if transcode {
		topts, err := codec.ParseTableOptions(q.Query.Get("includeObject"))
		if err != nil {
			return err
		}
		w := codec.NewWriter(m, topts, a.clock.Now)
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
	h := st.Header()
	for k, v := range responseHeader(x.Info.Response.Header, false) {
		h[k] = v
	}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	st.WriteHeader(responseStatus(x.Info.Response.Status))
	if r.Method != http.MethodHead {
		st.Send(b)
	}
	return nil
}

// synthWatchListFits reports whether a streaming list built from recorded
// LIST lst (and the recorded WATCH after it) can go to the client of q:
// in an encoding it accepts, and with the LIST's resourceVersion served
// unchanged. Otherwise the world answers.
func (a *Answerer) synthWatchListFits(q tape.Query, lst *tape.Exchange) bool {
	if _, transcode, err := a.negotiate(q, codec.TargetWatch, lst.ListFormat()); err != nil || transcode {
		return false
	}
	sl, err := a.rec.synthList(lst)
	if err != nil {
		return true // served as before: the error is reported then
	}
	n, ok := tape.RVNumber(sl.rv)
	return !ok || a.store.ObserveN(n) == n
}

// listFromWatchFits is synthWatchListFits for a LIST built from recorded
// streaming list x.
func (a *Answerer) listFromWatchFits(q tape.Query, x *tape.Exchange) bool {
	if _, transcode, err := a.negotiate(q, codec.TargetList, x.Format); err != nil || transcode {
		return false
	}
	l, err := a.rec.listFromWatch(x)
	if err != nil {
		return true
	}
	n, ok := tape.RVNumber(l.rv)
	return !ok || a.store.ObserveN(n) == n
}

// gvkOf is the kind of the objects of an API path (zero if unknown).
func (a *Answerer) gvkOf(path string) schema.GroupVersionKind {
	if a.store == nil {
		return schema.GroupVersionKind{}
	}
	t, ok := world.ParsePath(path)
	if !ok {
		return schema.GroupVersionKind{}
	}
	info, ok := a.store.Info(t.Resource)
	if !ok {
		return schema.GroupVersionKind{}
	}
	return info.GVK()
}
