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
	"github.com/wtrace/wtrace/replay/internal/tape"
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
func (s *Server) readBody(x *tape.Exchange) ([]byte, error) {
	if x.Info.BodyBytes > maxSynthBytes {
		return nil, fmt.Errorf("%w: exchange %d holds %d bytes (limit %d)", errTooLarge, x.ID, x.Info.BodyBytes, maxSynthBytes)
	}
	src, err := s.openSource(x)
	if err != nil {
		return nil, err
	}
	var r io.Reader = &sourceReader{src: src}
	if strings.EqualFold(x.Info.Response.Encoding, "gzip") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: gzip: %w", x.ID, err)
		}
		r = zr
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSynthBytes+1))
	if err != nil {
		return nil, fmt.Errorf("replay: exchange %d: %w", x.ID, err)
	}
	if len(b) > maxSynthBytes {
		return nil, fmt.Errorf("%w: exchange %d decodes to more than %d bytes", errTooLarge, x.ID, maxSynthBytes)
	}
	return b, nil
}

// synthList is a streaming list's initial events built from recorded LIST
// pages: one write per event, then the initial-events-end bookmark.
type synthList struct {
	format frame.Format
	rv     string
	writes []tape.Write
	size   int64
}

// listPages returns first and the pages that follow it through their
// continue tokens.
func (s *Server) listPages(first *tape.Exchange) ([]*tape.Exchange, [][]byte, error) {
	pages := []*tape.Exchange{first}
	var bodies [][]byte
	total := 0
	for x := first; ; {
		b, err := s.readBody(x)
		if err != nil {
			return nil, nil, err
		}
		total += len(b)
		if total > maxSynthBytes {
			return nil, nil, fmt.Errorf("%w: pages from exchange %d exceed %d bytes", errTooLarge, first.ID, maxSynthBytes)
		}
		bodies = append(bodies, b)
		l, err := frame.ListItems(x.ListFormat(), b)
		if err != nil {
			return nil, nil, fmt.Errorf("replay: exchange %d: %w", x.ID, err)
		}
		if l.Continue == "" || len(pages) >= maxPages {
			return pages, bodies, nil
		}
		var next *tape.Exchange
		for _, c := range s.m.ByKey[first.Q.Key] {
			if c.Q.Continue == l.Continue {
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
func (s *Server) buildSynthList(first *tape.Exchange) (*synthList, error) {
	pages, bodies, err := s.listPages(first)
	if err != nil {
		return nil, err
	}
	f := first.ListFormat()
	sl := &synthList{format: f}
	var apiVersion, kind string
	for i, b := range bodies {
		l, err := frame.ListItems(pages[i].ListFormat(), b)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: %w", pages[i].ID, err)
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
	sl.writes = append(sl.writes, tape.Write{Data: b, Events: 1})
	sl.size += int64(len(b)) + 48
}

// serveSynthWatchList answers a streaming-list request (sendInitialEvents)
// that the session did not record, from a recorded LIST (all its pages) and
// the recorded WATCH that started from the LIST's resourceVersion: initial
// ADDED events, the initial-events-end bookmark, then the watch's events on
// its own timeline. Without such a watch the stream stays open after the
// bookmark.
func (s *Server) serveSynthWatchList(st *streamer, r *http.Request, q tape.Query, lst *tape.Exchange) (watch *tape.Exchange, err error) {
	sl, err := s.synthList(lst)
	if err != nil {
		return nil, err
	}
	if ws := tape.Filter(s.m.ByKey[q.Key], func(c *tape.Exchange) bool {
		return c.Q.RV == sl.rv && sl.rv != "" && c.Format == sl.format
	}); len(ws) > 0 {
		watch = tape.PreferAccepted(ws, q.Accept)[0]
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
	if !st.run(&tape.PlanSource{Plan: &tape.Plan{Writes: sl.writes}}, 0, 0) {
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
	s.continueWatch(st, watch, 0, watch.RespTime())
	return watch, nil
}

// synthList returns the streaming list's initial events built from LIST
// lst (cached).
func (s *Server) synthList(lst *tape.Exchange) (*synthList, error) {
	v, err := s.cache.Get("synth:"+strconv.FormatInt(lst.ID, 10), func() (any, int64, error) {
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
func (s *Server) continueWatch(st *streamer, x *tape.Exchange, skip, base int64) {
	c := &watchCont{st: st, x: x, skip: skip, base: base}
	st.runRest(c.step)
}

// watchCont is where the body of a watch stream is (see continueWatch):
// a pass over the recorded exchange (several with Loop), then its end.
type watchCont struct {
	st         *streamer
	x          *tape.Exchange
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
			var src tape.Source
			if st.flow != nil && st.flow.w != nil {
				src = tape.NewEventSource(s.file, x, c.skip) // transcoded: event by event
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
				st.shift += s.scale(x.EndTime() - c.base)
				if s.speed != 0 && x.EndTime() <= x.RespTime() {
					st.shift += time.Millisecond
				}
				c.base, c.skip, c.phase = x.RespTime(), 0, wcOpen
			}
		case wcFinish:
			st.finish(endOf(x), x.EndTime(), c.base)
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
func (s *Server) buildListFromWatch(x *tape.Exchange) (*synthFromWatch, error) {
	sc := s.file.ExchangeRecords(x.ID)
	var objs [][]byte
	var apiVersion, kind, rv string
	total := 0
	for {
		rec, err := sc.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("replay: exchange %d: no initial-events-end bookmark", x.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: %w", x.ID, err)
		}
		fr, ok := rec.(*formats.Frame)
		if !ok {
			continue
		}
		m, err := frame.Peek(x.Format, fr.Data)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d event %d: %w", x.ID, fr.Seq, err)
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
		av, k, obj, err := frame.EventObject(x.Format, fr.Data)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d event %d: %w", x.ID, fr.Seq, err)
		}
		apiVersion, kind = av, k
		total += len(obj)
		if total > maxSynthBytes {
			return nil, fmt.Errorf("%w: initial events of exchange %d exceed %d bytes", errTooLarge, x.ID, maxSynthBytes)
		}
		objs = append(objs, obj)
	}
	body := frame.BuildList(x.Format, apiVersion, kind+"List", rv, objs)
	if body == nil {
		return nil, fmt.Errorf("replay: exchange %d: cannot build a %s list", x.ID, x.Format)
	}
	ct := "application/json"
	if x.Format == frame.Protobuf {
		ct = "application/vnd.kubernetes.protobuf"
	}
	return &synthFromWatch{body: body, contentType: ct, rv: rv}, nil
}

// serveListFromWatch answers a LIST the session did not record from the
// initial events of a recorded streaming list.
func (s *Server) serveListFromWatch(st *streamer, x *tape.Exchange) error {
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
func (s *Server) listFromWatch(x *tape.Exchange) (*synthFromWatch, error) {
	v, err := s.cache.Get("list:"+strconv.FormatInt(x.ID, 10), func() (any, int64, error) {
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
func (s *Server) serveEmptyWatch(st *streamer, x *tape.Exchange) {
	hd := newHead(http.StatusOK, http.Header{"Content-Type": {"application/json"}})
	if x != nil {
		hd = s.watchHead(x, st.flow)
	}
	if st.begin(hd) {
		st.runRest(st.hold)
	}
}
