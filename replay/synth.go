package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// maxSynthBytes bounds a LIST body (all pages, decoded) that is held in
// memory to synthesize a streaming list from it, and the initial events of a
// streaming list held to build a LIST: the apiserver itself refuses to build
// responses much beyond this (its etcd request limit is 1.5 MiB per object,
// and lists of many thousands of objects stay in the hundreds of MiB).
const maxSynthBytes = 512 << 20

// maxPages bounds the LIST pages followed (limit/continue) to assemble one
// list, so a session whose continue tokens form a cycle cannot loop.
const maxPages = 100000

var errTooLarge = errors.New("replay: list too large to synthesize")

// readBody returns the whole stored body of opaque exchange x, decoded if it
// was gzip'd.
func (s *Server) readBody(x *recorded) ([]byte, error) {
	if x.info.BodyBytes > maxSynthBytes {
		return nil, fmt.Errorf("%w: exchange %d holds %d bytes (limit %d)", errTooLarge, x.id, x.info.BodyBytes, maxSynthBytes)
	}
	src, err := s.openSource(x)
	if err != nil {
		return nil, err
	}
	var r io.Reader = &sourceReader{src: src}
	if strings.EqualFold(x.info.Response.Encoding, "gzip") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: gzip: %w", x.id, err)
		}
		r = zr
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSynthBytes+1))
	if err != nil {
		return nil, fmt.Errorf("replay: exchange %d: %w", x.id, err)
	}
	if len(b) > maxSynthBytes {
		return nil, fmt.Errorf("%w: exchange %d decodes to more than %d bytes", errTooLarge, x.id, maxSynthBytes)
	}
	return b, nil
}

// listFormat is the format of a LIST response, from its Content-Type.
func listFormat(x *recorded) frame.Format {
	for _, h := range x.info.Response.Header {
		if strings.EqualFold(h.Name, "Content-Type") {
			if strings.Contains(strings.ToLower(h.Value), "protobuf") {
				return frame.Protobuf
			}
			return frame.JSON
		}
	}
	return frame.JSON
}

// synthList is a streaming list's initial events built from recorded LIST
// pages: one write per event, then the initial-events-end bookmark.
type synthList struct {
	format frame.Format
	rv     string
	writes []write
	size   int64
}

// listPages returns first and the pages that follow it through their
// continue tokens.
func (s *Server) listPages(first *recorded) ([]*recorded, [][]byte, error) {
	pages := []*recorded{first}
	var bodies [][]byte
	total := 0
	for x := first; ; {
		b, err := s.readBody(x)
		if err != nil {
			return nil, nil, err
		}
		total += len(b)
		if total > maxSynthBytes {
			return nil, nil, fmt.Errorf("%w: pages from exchange %d exceed %d bytes", errTooLarge, first.id, maxSynthBytes)
		}
		bodies = append(bodies, b)
		l, err := frame.ListItems(listFormat(x), b)
		if err != nil {
			return nil, nil, fmt.Errorf("replay: exchange %d: %w", x.id, err)
		}
		if l.Continue == "" || len(pages) >= maxPages {
			return pages, bodies, nil
		}
		var next *recorded
		for _, c := range s.m.byKey[first.q.key] {
			if c.q.cont == l.Continue {
				next = c
				break
			}
		}
		if next == nil {
			return pages, bodies, nil // the client never fetched the rest
		}
		x = next
		pages = append(pages, x)
	}
}

// buildSynthList turns LIST pages into a streaming list's initial events.
func (s *Server) buildSynthList(first *recorded) (*synthList, error) {
	pages, bodies, err := s.listPages(first)
	if err != nil {
		return nil, err
	}
	f := listFormat(first)
	sl := &synthList{format: f}
	var apiVersion, kind string
	for i, b := range bodies {
		l, err := frame.ListItems(listFormat(pages[i]), b)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: %w", pages[i].id, err)
		}
		if i == 0 {
			sl.rv = l.ResourceVersion
			apiVersion, kind = l.APIVersion, strings.TrimSuffix(l.Kind, "List")
		}
		for _, item := range l.Items {
			ev := frame.WatchEvent(f, "ADDED", apiVersion, kind, item)
			sl.add(f, ev)
		}
	}
	// The bookmark as kube-apiserver v1.33 sends it (with the list
	// blueprint annotation), else the minimal one.
	bm, err := codec.EndBookmark(f, schema.FromAPIVersionAndKind(apiVersion, kind), sl.rv)
	if err != nil {
		bm = frame.Bookmark(f, apiVersion, kind, sl.rv, true)
	}
	sl.add(f, bm)
	return sl, nil
}

// add appends one event, framed: JSON ends it with a newline (as the
// apiserver does), protobuf prefixes its 4-byte big-endian length.
func (sl *synthList) add(f frame.Format, ev []byte) {
	var b []byte
	if f == frame.Protobuf {
		b = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(ev)), uint32(len(ev)))
		b = append(b, ev...)
	} else {
		b = append(append(make([]byte, 0, len(ev)+1), ev...), '\n')
	}
	sl.writes = append(sl.writes, write{data: b, events: 1})
	sl.size += int64(len(b)) + 48
}

// serveSynthWatchList answers a streaming-list request (sendInitialEvents)
// that the session did not record, from a recorded LIST (all its pages) and
// the recorded WATCH that started from the LIST's resourceVersion: initial
// ADDED events, the initial-events-end bookmark, then the watch's events on
// its own timeline. Without such a watch the stream stays open after the
// bookmark.
func (s *Server) serveSynthWatchList(st *streamer, r *http.Request, q query, lst *recorded) (watch *recorded, err error) {
	sl, err := s.synthList(lst)
	if err != nil {
		return nil, err
	}
	if ws := filter(s.m.byKey[q.key], func(c *recorded) bool {
		return c.q.rv == sl.rv && sl.rv != "" && c.format == sl.format
	}); len(ws) > 0 {
		watch = preferAccepted(ws, q.accept)[0]
	}
	var hd *head
	if watch != nil {
		hd = s.headOf(watch, http.StatusOK)
	} else {
		hd = newHead(http.StatusOK, http.Header{"Content-Type": {watchContentType(sl.format)}})
	}
	if !st.begin(hd) {
		return watch, nil
	}
	if !st.run(&planSource{p: &plan{writes: sl.writes}}, 0, 0) {
		return watch, nil
	}
	// With a world, the rest is a flow (the LIST's encoding was one the
	// client accepts: see synthWatchListFits).
	if st.flow, err = s.newFlow(r, q, sl.format, watch, sl.rv); err != nil {
		st.flow = nil
	}
	if watch == nil {
		st.runRest(st.hold)
		return nil, nil
	}
	s.continueWatch(st, watch, 0, watch.respTime())
	return watch, nil
}

// synthList returns the streaming list's initial events built from LIST
// lst (cached).
func (s *Server) synthList(lst *recorded) (*synthList, error) {
	v, err := s.cache.get("synth:"+strconv.FormatInt(lst.id, 10), func() (any, int64, error) {
		sl, err := s.buildSynthList(lst)
		if err != nil {
			return nil, 0, err
		}
		return sl, sl.size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*synthList), nil
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
func (s *Server) continueWatch(st *streamer, x *recorded, skip, base int64) {
	c := &watchCont{st: st, x: x, skip: skip, base: base}
	st.runRest(c.step)
}

// watchCont is where the body of a watch stream is (see continueWatch):
// a pass over the recorded exchange (several with Loop), then its end.
type watchCont struct {
	st         *streamer
	x          *recorded
	skip, base int64
	rd         *writeReader
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
	st, s, x := c.st, c.st.s, c.x
	for {
		if st.inSched && c.phase != wcRun {
			if c.phase != wcDone {
				st.yield()
			}
			return
		}
		switch c.phase {
		case wcOpen:
			var src source
			if st.flow != nil && st.flow.w != nil {
				src = s.eventSource(x, c.skip) // transcoded: event by event
			} else {
				var err error
				if src, err = s.openSource(x); err != nil {
					st.stopped = "reading session: " + err.Error()
					c.phase = wcDone
					return
				}
			}
			c.rd, c.phase = st.reader(src, c.skip), wcRun
		case wcRun:
			ok := false
			if st.flow != nil {
				ok = st.runFlow(&c.rd, c.base)
			} else {
				ok = st.runFrom(c.rd, c.base)
			}
			if st.parked {
				return
			}
			switch {
			case !ok:
				c.phase = wcDone
			case !s.opts.Loop:
				c.phase = wcFinish
			default:
				st.shift += s.scale(x.endTime() - c.base)
				if s.speed != 0 && x.endTime() <= x.respTime() {
					st.shift += time.Millisecond
				}
				c.base, c.skip, c.phase = x.respTime(), 0, wcOpen
			}
		case wcFinish:
			st.finish(endOf(x), x.endTime(), c.base)
			if !st.parked {
				c.phase = wcDone
			}
			return
		default:
			return
		}
	}
}

// synthFromWatch is a LIST built from a recorded streaming list's initial
// events.
type synthFromWatch struct {
	body        []byte
	contentType string
	rv          string
}

// buildListFromWatch reads the initial ADDED events of streaming-list watch
// x up to its initial-events-end bookmark and builds the LIST a client would
// have got at that resourceVersion.
func (s *Server) buildListFromWatch(x *recorded) (*synthFromWatch, error) {
	sc := s.file.ExchangeRecords(x.id)
	var objs [][]byte
	var apiVersion, kind, rv string
	total := 0
	for {
		rec, err := sc.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("replay: exchange %d: no initial-events-end bookmark", x.id)
		}
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: %w", x.id, err)
		}
		fr, ok := rec.(*formats.Frame)
		if !ok {
			continue
		}
		m, err := frame.Peek(x.format, fr.Data)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d event %d: %w", x.id, fr.Seq, err)
		}
		if m.Type == "BOOKMARK" && m.InitialEventsEnd {
			rv = m.ResourceVersion
			if kind == "" {
				apiVersion, kind = m.APIVersion, m.Kind
			}
			break
		}
		if m.Type != "ADDED" {
			continue
		}
		av, k, obj, err := frame.EventObject(x.format, fr.Data)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d event %d: %w", x.id, fr.Seq, err)
		}
		apiVersion, kind = av, k
		total += len(obj)
		if total > maxSynthBytes {
			return nil, fmt.Errorf("%w: initial events of exchange %d exceed %d bytes", errTooLarge, x.id, maxSynthBytes)
		}
		objs = append(objs, obj)
	}
	body := frame.BuildList(x.format, apiVersion, kind+"List", rv, objs)
	if body == nil {
		return nil, fmt.Errorf("replay: exchange %d: cannot build a %s list", x.id, x.format)
	}
	ct := "application/json"
	if x.format == frame.Protobuf {
		ct = "application/vnd.kubernetes.protobuf"
	}
	return &synthFromWatch{body: body, contentType: ct, rv: rv}, nil
}

// serveListFromWatch answers a LIST the session did not record from the
// initial events of a recorded streaming list.
func (s *Server) serveListFromWatch(st *streamer, x *recorded) error {
	l, err := s.listFromWatch(x)
	if err != nil {
		return err
	}
	h := st.w.Header()
	h.Set("Content-Type", l.contentType)
	h.Set("Content-Length", strconv.Itoa(len(l.body)))
	st.w.WriteHeader(http.StatusOK)
	st.send(l.body)
	return nil
}

// listFromWatch returns the LIST built from streaming list x (cached).
func (s *Server) listFromWatch(x *recorded) (*synthFromWatch, error) {
	v, err := s.cache.get("list:"+strconv.FormatInt(x.id, 10), func() (any, int64, error) {
		l, err := s.buildListFromWatch(x)
		if err != nil {
			return nil, 0, err
		}
		return l, int64(len(l.body)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*synthFromWatch), nil
}

// resumePoint is where a watch from a resourceVersion continues: just after
// the event (or bookmark) that carried it in a recorded watch.
type resumePoint struct {
	x      *recorded
	off    int64 // body offset just past that event
	time   int64 // its capture time: the new timeline's origin
	remain int   // events after it
}

// maxMarkFrames bounds the events of one watch whose marks (where each
// ends, its time and resourceVersion: about 60 bytes each) are kept in the
// cache; the marks of longer watches are read from the file each time.
const maxMarkFrames = 1 << 18

// eachMark calls fn with the marks of watch exchange x in order, until fn
// returns false: from the cache, or streamed from the file for a long
// watch.
func (s *Server) eachMark(x *recorded, fn func(i int, m mark) bool) error {
	if x.info.Frames > maxMarkFrames {
		sc := s.file.ExchangeRecords(x.id)
		i := 0
		for {
			rec, err := sc.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				var de *formats.DamageError
				if errors.As(err, &de) {
					continue
				}
				return err
			}
			if fr, ok := rec.(*formats.Frame); ok {
				if !fn(i, markOf(x, fr)) {
					return nil
				}
				i++
			}
		}
	}
	v, err := s.cache.get("marks:"+strconv.FormatInt(x.id, 10), func() (any, int64, error) {
		ms, err := readMarks(s.file, x)
		if err != nil {
			return nil, 0, err
		}
		var n int64
		for _, m := range ms {
			n += int64(len(m.rv)) + 48
		}
		return ms, n, nil
	})
	if err != nil {
		return err
	}
	for i, m := range v.([]mark) {
		if !fn(i, m) {
			break
		}
	}
	return nil
}

// findResume looks for resourceVersion rv among the live events of the
// recorded watches of a key (see recorded.resumable), in recorded order, and
// prefers a point with events after it. found is false if rv is not there.
func (s *Server) findResume(cands []*recorded, rv string) (rp resumePoint, found bool, err error) {
	for _, x := range cands {
		if !x.resumable() {
			continue
		}
		// The last event carrying rv: a watch from rv wants what is newer,
		// and a bookmark often repeats the resourceVersion of the event
		// before it.
		live := !x.q.sie
		last, n := -1, 0
		var lm mark
		err := s.eachMark(x, func(i int, m mark) bool {
			if m.iee {
				live = true
			}
			if live && m.rv == rv {
				last, lm = i, m
			}
			n = i + 1
			return true
		})
		if err != nil {
			return rp, false, err
		}
		if last < 0 {
			continue
		}
		p := resumePoint{x: x, off: lm.end, time: lm.time, remain: n - last - 1}
		if !found || (rp.remain == 0 && p.remain > 0) {
			rp, found = p, true
		}
		if rp.remain > 0 {
			return rp, true, nil
		}
	}
	return rp, found, nil
}

// newestRV returns the largest numeric resourceVersion a key's watches and
// requests recorded, and false if there is none.
func (s *Server) newestRV(cands []*recorded) (uint64, bool) {
	var max uint64
	ok := false
	see := func(rv string) {
		if n, good := rvNumber(rv); good && (!ok || n > max) {
			max, ok = n, true
		}
	}
	for _, x := range cands {
		see(x.q.rv)
		if x.format == frame.Unknown {
			continue
		}
		_ = s.eachMark(x, func(_ int, m mark) bool {
			see(m.rv)
			return true
		})
	}
	return max, ok
}

// serveExpired answers a watch from a resourceVersion the session does not
// hold with what the apiserver sends for one it compacted away: a 200 watch
// stream with one ERROR event carrying a 410 Expired Status (always JSON,
// which every client decodes from the Content-Type), then a clean end. The
// client relists.
func (s *Server) serveExpired(st *streamer, rv string) {
	msg := "too old resource version: " + rv + " (not in the replayed session)"
	var b bytes.Buffer
	b.WriteString(`{"type":"ERROR","object":`)
	b.Write(statusJSON(http.StatusGone, "Expired", msg))
	b.WriteString("}\n")
	st.w.Header().Set("Content-Type", "application/json")
	st.w.WriteHeader(http.StatusOK)
	st.send(b.Bytes())
}

// serveEmptyWatch answers a watch that is past the session's last event
// with an open stream that sends nothing, as a quiet apiserver does, until
// the client's timeoutSeconds (then a clean end), the client leaves, or
// Close. Headers come from x when there is one.
func (s *Server) serveEmptyWatch(st *streamer, x *recorded) {
	hd := newHead(http.StatusOK, http.Header{"Content-Type": {"application/json"}})
	if x != nil {
		hd = s.watchHead(x, st.flow)
	}
	if st.begin(hd) {
		st.runRest(st.hold)
	}
}
