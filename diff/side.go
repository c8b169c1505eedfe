package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/ident"
)

// side is one session as diff sees it: its exchanges classified and
// grouped, and a digest of every body that is not a watch's. It holds no
// body and no event: O(exchanges), like the file's index.
type side struct {
	f    *formats.File
	name string
	// writes by object, each in request order; objects in the order
	// their first write was made.
	writes  map[Object][]*exch
	wOrder  []Object
	streams map[string][]*chain // watch chains by request key
	sOrder  []string
	others  map[string][]*exch // other exchanges by request key
	oOrder  []string
	// names are the names the server generated for creates
	// (names.go); evNames maps an Event's name to its identity
	// (kevents.go), from the creates of the session.
	names   *names
	evNames map[string]string
	nWrites int // writes, failed ones too
}

// union is the keys of both sides in the order they are compared: a's in
// its order (aOrder, the keys of a), then b's that a lacks, in b's order.
func union[K comparable, V any](aOrder []K, a map[K]V, bOrder []K) []K {
	keys := slices.Clone(aOrder)
	for _, k := range bOrder {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// exch is one exchange that is not a watch.
type exch struct {
	id     int64
	cls    class // classWrite or classOther
	index  int   // position among the writes of its object, or the exchanges of its key
	req    request
	target string // as sent
	time   int64  // the request's time
	status int    // 0 when no response was recorded
	obj    Object // the object a write or GET names (a create's, from its body)
	hasObj bool
	reqDoc digest // request body
	resDoc digest // response body
	// A create with metadata.generateName: the generateName, the
	// controlling owner (as sent), and the name the server gave.
	genName, ownerKind, ownerName, server string
	kev                                   *kevent // a write of an Event
}

// failed reports whether a write is a failed attempt: not answered, or
// answered with anything but a 2xx — a 409 Conflict or AlreadyExists, a
// 429, a 5xx, which clients retry; a 403 of a namespace being terminated,
// a 404 of an object already gone, which they retry or drop. It changed
// nothing, and how many a controller makes depends on timing (whose write
// reached the apiserver first, when the namespace began to terminate), not
// on its logic. A controller whose writes are now refused where they were
// made differs all the same: its successful writes are missing.
func (e *exch) failed() bool {
	return e.status < 200 || e.status > 299
}

// base is the object a write changes, whatever its subresource.
func (e *exch) base() Object {
	o := e.obj
	o.Subresource = ""
	return o
}

// chain is one watch stream: a watch and the re-watches that followed it
// (each began after the previous one ended), in order.
type chain struct {
	req      request
	ids      []int64
	start    int64 // the first response head's time (the request's, without one)
	end      int64 // when the last exchange ended (0 while open)
	conn     uint64
	statuses []int // distinct response statuses, in order of first appearance
	events   int64
}

// digest is what pass one keeps of a body: enough to tell whether two
// bodies are the same, not the body.
type digest struct {
	size   int64
	raw    uint64 // maphash of the bytes, content-encoding undone
	norm   uint64 // canonical hash (normalize.go), when normOK
	normOK bool
	note   string // why it was not normalized
	name   string // a request body's metadata.name (generateName + "*")
}

// same reports whether two bodies are the same: normalized when both
// were, byte for byte otherwise.
func (d digest) same(o digest) bool {
	if d.normOK && o.normOK {
		return d.norm == o.norm
	}
	return d.size == o.size && d.raw == o.raw
}

func (d digest) bytesSame(o digest) bool { return d.size == o.size && d.raw == o.raw }

// load reads f's index and, for exchanges that are not watches, their
// bodies (pass one).
func (c *comparer) load(f *formats.File, name string) (*side, error) {
	s := &side{f: f, name: name, writes: map[Object][]*exch{}, streams: map[string][]*chain{}, others: map[string][]*exch{},
		names: &names{}, evNames: map[string]string{}}
	idx := f.Index()
	var bodies []int64
	byID := map[int64]*exch{}
	for i := range idx.Exchanges {
		x := &idx.Exchanges[i]
		q := parseRequest(&x.Request)
		cls := classify(q, x)
		if c.ignored(q, cls) {
			continue
		}
		switch cls {
		case classWatch:
			s.addWatch(q, x)
		default:
			e := &exch{id: x.Request.Exchange, cls: cls, req: q, target: x.Request.Target, time: x.Request.Time}
			if x.Response != nil {
				e.status = x.Response.Status
			}
			e.obj, e.hasObj = q.obj, q.resource
			byID[e.id] = e
			bodies = append(bodies, e.id)
		}
	}
	var creates []int64
	for _, id := range bodies {
		if e := byID[id]; e.cls == classWrite && e.req.method == "POST" && e.hasObj && e.obj.Name == "" && e.status >= 200 && e.status <= 299 {
			creates = append(creates, id)
		}
	}
	if len(creates) > 0 {
		// The names the server generated, first: a body that quotes one
		// (an Event about a new Pod) may be recorded before the answer
		// that named it ended.
		if err := c.readBodies(s, byID, creates, true); err != nil {
			return nil, err
		}
	}
	if len(bodies) > 0 {
		if err := c.readBodies(s, byID, bodies, false); err != nil {
			return nil, err
		}
	}
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := byID[id]
		if e.hasObj {
			e.obj.Name = s.names.canonString(e.obj.Name)
			e.req.key = s.names.canonString(e.req.key)
		}
		if e.req.method == "POST" && e.hasObj && e.obj.Name == "" && e.reqDoc.name != "" {
			e.obj.Name = e.reqDoc.name // a create: the object its body names
			if e.server != "" {
				e.obj.Name = s.names.canonString(e.server)
			}
		}
		if e.cls == classWrite {
			if e.kev != nil && e.kev.lease && !c.opts.Leases {
				continue // leader election's own Events (see Options.Leases)
			}
			s.nWrites++
			if e.hasObj && isEventResource(e.obj) && e.obj.Subresource == "" {
				s.eventObject(e)
			}
			if _, ok := s.writes[e.obj]; !ok {
				s.wOrder = append(s.wOrder, e.obj)
			}
			e.index = len(s.writes[e.obj])
			s.writes[e.obj] = append(s.writes[e.obj], e)
			continue
		}
		if _, ok := s.others[e.req.key]; !ok {
			s.oOrder = append(s.oOrder, e.req.key)
		}
		e.index = len(s.others[e.req.key])
		s.others[e.req.key] = append(s.others[e.req.key], e)
	}
	return s, nil
}

// ignored reports whether Options.IgnoreResources or IgnoreVerbs leave
// the exchange out (or it is a Lease's, without Options.Leases).
func (c *comparer) ignored(q request, cls class) bool {
	if cls == classWrite {
		for _, v := range c.opts.IgnoreVerbs {
			if strings.EqualFold(v, q.method) {
				return true
			}
		}
	}
	if !q.resource {
		return false
	}
	if !c.opts.Leases && q.obj.Resource == "leases" && q.obj.Group == "coordination.k8s.io" {
		return true
	}
	for _, r := range c.opts.IgnoreResources {
		name, group, dotted := strings.Cut(r, ".")
		if name == q.obj.Resource && (!dotted || group == q.obj.Group) {
			return true
		}
	}
	return false
}

// eventObject names the object of a write of an Event by the Event's
// identity (kevents.go): a create's from its body, a later write's from
// the create of that name in this session (one the session did not see
// created keeps its name). Its digest becomes that of its identity and
// count, what diff compares of an Event.
func (s *side) eventObject(e *exch) {
	if e.kev == nil {
		return
	}
	id := e.kev.identity
	name := e.kev.name
	if name == "" {
		name = e.obj.Name
	}
	switch {
	case id != "" && e.req.method == "POST":
		if !e.failed() {
			// By its name as a later write's path reads (through the
			// table: an Event about a generated object is named after
			// it), so that its count PATCH is the same Event's.
			s.evNames[s.names.canonString(name)] = id
		}
	case id == "":
		id = s.evNames[e.obj.Name]
	}
	if id == "" {
		return
	}
	if e.obj.Name != "" {
		// Its path names it by its name, as the Object does: by what it
		// says instead.
		e.req.key = strings.Replace(e.req.key, "/events/"+e.obj.Name, "/events/(the Event)", 1)
	}
	e.obj.Name, e.obj.Event = "", id
	h := fnv.New64a()
	h.Write([]byte(e.verb() + "\x00" + strconv.FormatInt(e.kev.count, 10)))
	e.reqDoc = digest{norm: h.Sum64(), normOK: true, size: e.reqDoc.size, raw: e.reqDoc.raw}
}

// addWatch puts watch exchange x into a chain of its key: the chain on
// the same connection whose last exchange ended before x began, else any
// chain whose last exchange ended before x began (the one that ended
// last), else a new chain. Exchanges come in the order they began.
func (s *side) addWatch(q request, x *formats.ExchangeInfo) {
	start := x.Request.Time
	if x.Response != nil {
		start = x.Response.Time
	}
	var end int64
	if x.End != nil {
		end = x.End.Time
	}
	status := 0
	if x.Response != nil {
		status = x.Response.Status
	}
	var best *chain
	for _, ch := range s.streams[q.key] {
		if ch.end == 0 || ch.end > x.Request.Time {
			continue // still open when x began: a concurrent watch
		}
		switch {
		case best == nil:
			best = ch
		case ch.conn == x.Request.Conn && best.conn != x.Request.Conn:
			best = ch
		case (ch.conn == x.Request.Conn) == (best.conn == x.Request.Conn) && ch.end > best.end:
			best = ch
		}
	}
	if best == nil {
		best = &chain{req: q, start: start}
		if _, ok := s.streams[q.key]; !ok {
			s.sOrder = append(s.sOrder, q.key)
		}
		s.streams[q.key] = append(s.streams[q.key], best)
	}
	best.ids = append(best.ids, x.Request.Exchange)
	best.end, best.conn = end, x.Request.Conn
	best.events += x.Frames
	if !slices.Contains(best.statuses, status) {
		best.statuses = append(best.statuses, status)
	}
}

// bodyAcc gathers one body during pass one.
type bodyAcc struct {
	buf  []byte
	size int64
	over bool // larger than MaxBodySize: only hashed
	raw  rawHash
}

// readBodies reads the bodies of the given exchanges in one pass over the
// blocks that hold them, and keeps a digest of each. A body is held in
// memory only until its End (at most MaxBodySize; larger ones are hashed
// as they stream by and compared byte for byte). With namesOnly it only
// registers the names the server generated for creates (readResponse),
// and keeps no digest.
func (c *comparer) readBodies(s *side, byID map[int64]*exch, ids []int64, namesOnly bool) error {
	type acc struct{ req, res *bodyAcc }
	open := map[int64]*acc{}
	c.hasher.names = s.names
	defer func() { c.hasher.names = nil }()
	get := func(id int64, dir formats.Direction) *bodyAcc {
		a := open[id]
		if a == nil {
			a = &acc{}
			open[id] = a
		}
		p := &a.res
		if dir == formats.ClientToServer {
			p = &a.req
		}
		if *p == nil {
			*p = &bodyAcc{raw: c.newRawHash()}
		}
		return *p
	}
	finish := func(id int64, dir formats.Direction) {
		e, a := byID[id], open[id]
		if e == nil || a == nil {
			return
		}
		x := s.f.Exchange(id)
		if namesOnly {
			if dir == formats.ClientToServer && a.req != nil && !a.req.over {
				if doc, _ := c.document(a.req.buf, e.req.ctype, e.req.cenc); doc != nil {
					s.readRequest(e, doc)
				}
			}
			if dir == formats.ServerToClient && a.res != nil && !a.res.over {
				ctype, cenc := responseMedia(x)
				if doc, _ := c.document(a.res.buf, ctype, cenc); doc != nil {
					s.readResponse(e, doc)
				}
			}
			if dir == formats.ClientToServer {
				a.req = nil
			} else {
				a.res = nil
			}
			if a.req == nil && a.res == nil {
				delete(open, id)
			}
			return
		}
		if dir == formats.ClientToServer && a.req != nil {
			e.reqDoc = c.digestBody(a.req, e.req.ctype, e.req.cenc, true, func(doc []byte) { s.readRequest(e, doc) })
			a.req = nil
		}
		if dir == formats.ServerToClient && a.res != nil {
			ctype, cenc := responseMedia(x)
			e.resDoc = c.digestBody(a.res, ctype, cenc, false, func(doc []byte) { s.readResponse(e, doc) })
			a.res = nil
		}
		if a.req == nil && a.res == nil {
			delete(open, id)
		}
	}
	for rec, err := range s.f.ExchangeRecords(ids...).Intact(func(de *formats.DamageError) { c.warn("%s: %v", s.name, de) }) {
		if err != nil {
			return fmt.Errorf("diff: reading %s: %w", s.name, err)
		}
		switch r := rec.(type) {
		case *formats.Body:
			b := get(r.Exchange, r.Dir)
			b.size += int64(len(r.Data))
			b.raw.write(r.Data)
			if !b.over && int64(len(b.buf)+len(r.Data)) > c.maxBody {
				b.over, b.buf = true, nil
			}
			if !b.over {
				b.buf = append(b.buf, r.Data...)
			}
		case *formats.End:
			finish(r.Exchange, r.Dir)
		}
	}
	for id := range open { // exchanges the file ended inside
		finish(id, formats.ClientToServer)
		finish(id, formats.ServerToClient)
	}
	return nil
}

// responseMedia returns a response's Content-Type media type and
// Content-Encoding.
func responseMedia(x *formats.ExchangeInfo) (ctype, cenc string) {
	if x == nil || x.Response == nil {
		return "", ""
	}
	for _, h := range x.Response.Header {
		if strings.EqualFold(h.Name, "Content-Type") {
			ctype = mediaType(h.Value)
		}
	}
	return ctype, strings.ToLower(x.Response.Encoding)
}

// readRequest reads what pairing needs from a write's request body (its
// document, JSON): a create's generateName and controlling owner, an
// Event's identity and count.
func (s *side) readRequest(e *exch, doc []byte) {
	if e.cls != classWrite || !e.hasObj {
		return
	}
	if isEventResource(e.obj) && e.obj.Subresource == "" {
		k := parseKEvent(doc, s.names)
		e.kev = &k
		return
	}
	if e.req.method != "POST" || e.obj.Name != "" {
		return
	}
	var v struct {
		Metadata struct {
			GenerateName    string `json:"generateName"`
			OwnerReferences []struct {
				Kind       string `json:"kind"`
				Name       string `json:"name"`
				Controller *bool  `json:"controller"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(doc, &v) != nil || v.Metadata.GenerateName == "" {
		return
	}
	e.genName = v.Metadata.GenerateName
	for i, o := range v.Metadata.OwnerReferences {
		if i == 0 || (o.Controller != nil && *o.Controller) {
			e.ownerKind, e.ownerName = o.Kind, o.Name
		}
	}
}

// readResponse registers, for a successful create, the name the server
// gave it when it had a generateName (before its response is hashed, so
// that its own name reads as the canonical one), and the uids of the
// object and of its owners (names.registerUID).
func (s *side) readResponse(e *exch, doc []byte) {
	if e.cls != classWrite || e.req.method != "POST" || !e.hasObj || e.obj.Name != "" || e.failed() {
		return
	}
	var v struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string `json:"name"`
			UID             string `json:"uid"`
			OwnerReferences []struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(doc, &v) != nil || v.Metadata.Name == "" {
		return
	}
	if e.genName != "" {
		e.server = v.Metadata.Name
		s.names.register(Object{Group: e.obj.Group, Resource: e.obj.Resource, Namespace: e.obj.Namespace}, e.genName,
			e.ownerKind, e.ownerName, ident.Of(doc), e.server, e.id)
	}
	for _, o := range v.Metadata.OwnerReferences {
		s.names.registerUID(o.UID, o.Kind, e.obj.Namespace, o.Name)
	}
	s.names.registerUID(v.Metadata.UID, v.Kind, e.obj.Namespace, v.Metadata.Name)
}

// digestBody reduces a gathered body; look, if not nil, is shown its
// document (JSON) before it is hashed.
func (c *comparer) digestBody(b *bodyAcc, ctype, cenc string, request bool, look func(doc []byte)) digest {
	d := digest{size: b.size, raw: b.raw.sum()}
	if b.size == 0 {
		d.normOK, d.norm = true, 0
		return d
	}
	if b.over {
		d.note = fmt.Sprintf("a body of %d bytes, larger than the %d bytes diff normalizes, compared byte for byte", b.size, c.maxBody)
		return d
	}
	doc, note := c.document(b.buf, ctype, cenc)
	if doc == nil {
		d.note = note
		return d
	}
	if look != nil {
		look(doc)
	}
	h, err := c.hasher.sum(doc)
	if err != nil {
		d.note = "not JSON (" + err.Error() + "), compared byte for byte"
		return d
	}
	d.norm, d.normOK = h, true
	if request {
		d.name = createName(doc)
	}
	return d
}

// document returns the JSON text of a body: the body itself if it is
// JSON, decoded if it is a Kubernetes protobuf object, gunzipped first
// if it was sent gzip'd. nil (and why) when it is none of these.
func (c *comparer) document(body []byte, ctype, cenc string) ([]byte, string) {
	switch cenc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, "gzip: " + err.Error()
		}
		dec, err := io.ReadAll(io.LimitReader(zr, c.maxBody+1))
		if err != nil {
			return nil, "gzip: " + err.Error()
		}
		if int64(len(dec)) > c.maxBody {
			return nil, fmt.Sprintf("a gzip'd body of more than %d bytes decoded, compared as sent", c.maxBody)
		}
		body = dec
	default:
		return nil, "content-encoding " + cenc + ", compared byte for byte"
	}
	if bytes.HasPrefix(body, []byte(frame.ProtobufMagic)) || strings.Contains(ctype, "protobuf") {
		j, err := protoBodyJSON(body)
		if err != nil {
			return nil, "protobuf: " + err.Error() + "; compared byte for byte"
		}
		return j, ""
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') || strings.Contains(ctype, "json") {
		return body, ""
	}
	return nil, "not JSON, compared byte for byte"
}

// createName reads metadata.name (or metadata.generateName followed by
// "*") from a create's body.
func createName(doc []byte) string {
	var v struct {
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if json.Unmarshal(doc, &v) != nil {
		return ""
	}
	if v.Metadata.Name == "" && v.Metadata.GenerateName != "" {
		return v.Metadata.GenerateName + "*"
	}
	return v.Metadata.Name
}

// readBody reads exchange id's request or response body again (for a
// unified diff), up to MaxBodySize.
func (c *comparer) readBody(s *side, id int64, dir formats.Direction) ([]byte, error) {
	var buf []byte
	for rec, err := range s.f.ExchangeRecords(id).Intact(nil) {
		if err != nil {
			return nil, err
		}
		if b, ok := rec.(*formats.Body); ok && b.Dir == dir {
			if int64(len(buf)+len(b.Data)) > c.maxBody {
				return nil, fmt.Errorf("body larger than %d bytes", c.maxBody)
			}
			buf = append(buf, b.Data...)
		}
	}
	return buf, nil
}
