package fromtape

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// recording is what a replay derives from the session's recorded
// exchanges, built once and shared by every client through the cache:
// each exchange's timed writes (a plan, or streamed from the file when it
// is too large), whole bodies, LIST pages joined, the streaming lists
// built from LISTs and the LISTs built from streaming lists, response
// heads, a body's resourceVersion. It reads the session and never writes
// to a client; the Server decides what to serve with it.
type recording struct {
	file        *formats.File
	m           *tape.Matcher
	cache       *tape.Cache
	maxPlan     int64 // an exchange larger is streamed from the file, not planned
	eventChunks bool  // Options.EventChunks
	annotate    bool  // writes carry their events' resourceVersions (the replay keeps a world)
}

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

// synthList is a streaming list's initial events built from recorded LIST
// pages: one write per event, then the initial-events-end bookmark.
type synthList struct {
	format frame.Format
	rv     string
	writes []tape.Write
	size   int64
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

// synthFromWatch is a LIST built from a recorded streaming list's initial
// events.
type synthFromWatch struct {
	body        []byte
	contentType string
	rv          string
}

// openSource returns exchange x's writes: from the shared plan cache when
// the exchange is small enough, else streamed from the file.
func (r *recording) openSource(x *tape.Exchange) (tape.Source, error) {
	if x.Info.BodyBytes <= r.maxPlan {
		v, err := r.cache.Get("plan:"+strconv.FormatInt(x.ID, 10), func() (any, int64, error) {
			p, err := tape.BuildPlan(r.file, x, r.eventChunks, r.annotate)
			if err != nil {
				return nil, 0, err
			}
			return p, p.Size, nil
		})
		if err != nil {
			return nil, err
		}
		return &tape.PlanSource{Plan: v.(*tape.Plan)}, nil
	}
	return tape.NewProducer(r.file, x, r.eventChunks, r.annotate), nil
}

// readBody returns the whole stored body of opaque exchange x, decoded if it
// was gzip'd.
func (r *recording) readBody(x *tape.Exchange) ([]byte, error) {
	if x.Info.BodyBytes > maxSynthBytes {
		return nil, fmt.Errorf("%w: exchange %d holds %d bytes (limit %d)", errTooLarge, x.ID, x.Info.BodyBytes, maxSynthBytes)
	}
	src, err := r.openSource(x)
	if err != nil {
		return nil, err
	}
	var rd io.Reader = &sourceReader{src: src}
	if strings.EqualFold(x.Info.Response.Encoding, "gzip") {
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("replay: exchange %d: gzip: %w", x.ID, err)
		}
		rd = zr
	}
	b, err := io.ReadAll(io.LimitReader(rd, maxSynthBytes+1))
	if err != nil {
		return nil, fmt.Errorf("replay: exchange %d: %w", x.ID, err)
	}
	if len(b) > maxSynthBytes {
		return nil, fmt.Errorf("%w: exchange %d decodes to more than %d bytes", errTooLarge, x.ID, maxSynthBytes)
	}
	return b, nil
}

// listPages returns first and the pages that follow it through their
// continue tokens.
func (r *recording) listPages(first *tape.Exchange) ([]*tape.Exchange, [][]byte, error) {
	pages := []*tape.Exchange{first}
	var bodies [][]byte
	total := 0
	for x := first; ; {
		b, err := r.readBody(x)
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
		for _, c := range r.m.ByKey[first.Q.Key] {
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
func (r *recording) buildSynthList(first *tape.Exchange) (*synthList, error) {
	pages, bodies, err := r.listPages(first)
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

// synthList returns the streaming list's initial events built from LIST
// lst (cached).
func (r *recording) synthList(lst *tape.Exchange) (*synthList, error) {
	v, err := r.cache.Get("synth:"+strconv.FormatInt(lst.ID, 10), func() (any, int64, error) {
		sl, err := r.buildSynthList(lst)
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

// buildListFromWatch reads the initial ADDED events of streaming-list watch
// x up to its initial-events-end bookmark and builds the LIST a client would
// have got at that resourceVersion.
func (r *recording) buildListFromWatch(x *tape.Exchange) (*synthFromWatch, error) {
	sc := r.file.ExchangeRecords(x.ID)
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

// listFromWatch returns the LIST built from streaming list x (cached).
func (r *recording) listFromWatch(x *tape.Exchange) (*synthFromWatch, error) {
	v, err := r.cache.Get("list:"+strconv.FormatInt(x.ID, 10), func() (any, int64, error) {
		l, err := r.buildListFromWatch(x)
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

// headOf returns the head of watch exchange x with the given status
// (cached).
func (r *recording) headOf(x *tape.Exchange, status int) *stream.Head {
	v, _ := r.cache.Get("head:"+strconv.FormatInt(x.ID, 10)+":"+strconv.Itoa(status), func() (any, int64, error) {
		h := responseHeader(x.Info.Response.Header, false)
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", watchContentType(x.Format)) // the head was not captured
		}
		hd := stream.NewHead(status, h)
		return hd, hd.Size(), nil
	})
	return v.(*stream.Head)
}

// bodyRV is the resourceVersion of recorded opaque body x (a list's, or
// its object's), 0 if it has none (cached).
func (r *recording) bodyRV(x *tape.Exchange, t codec.Target) (uint64, error) {
	v, err := r.cache.Get("rv:"+strconv.FormatInt(x.ID, 10), func() (any, int64, error) {
		b, err := r.readBody(x)
		if err != nil {
			return nil, 0, err
		}
		f := bodyFormatOf(x)
		rv := ""
		if t == codec.TargetList {
			l, err := frame.ListItems(f, b)
			if err != nil {
				return nil, 0, err
			}
			rv = l.ResourceVersion
		} else {
			o, err := codec.FromBody(f, b)
			if err != nil {
				return nil, 0, err
			}
			rv = tape.PeekRV(f, frame.WatchEvent(f, "ADDED", o.APIVersion, o.Kind, o.Raw))
		}
		n, _ := tape.RVNumber(rv)
		return n, 16, nil
	})
	if err != nil {
		return 0, err
	}
	return v.(uint64), nil
}
