package formats

import (
	"reflect"
	"slices"
	"sort"
)

// OpenSet is what a session's records have announced and not yet ended: each
// open connection (its Conn record, and TLS) and each open exchange (its
// Request, Response and the End of each direction so far). A rotated
// recording announces all of it again at the start of its next part
// (FileSink), and a merge of the parts recognizes those copies
// (Announced) to drop them. The zero value is empty and ready to use.
type OpenSet struct {
	conns map[uint64]*openSetConn
	exs   map[int64]*openSetExchange
}

type openSetConn struct {
	conn Conn
	tls  *TLS
}

type openSetExchange struct {
	req  Request
	resp *Response
	ends [2]*End
}

// Track notes what r announces or ends. It copies what it keeps, so r may
// be reused after the call.
func (o *OpenSet) Track(r Record) {
	if o.conns == nil {
		o.conns, o.exs = map[uint64]*openSetConn{}, map[int64]*openSetExchange{}
	}
	switch r := r.(type) {
	case *Conn:
		o.conns[r.ID] = &openSetConn{conn: *r}
	case *TLS:
		if c := o.conns[r.Conn]; c != nil {
			t := *r
			c.tls = &t
		}
	case *ConnEnd:
		delete(o.conns, r.Conn)
		for id, x := range o.exs {
			if x.req.Conn == r.Conn {
				delete(o.exs, id)
			}
		}
	case *Request:
		req := *r
		req.Header = slices.Clone(r.Header)
		o.exs[r.Exchange] = &openSetExchange{req: req}
	case *Response:
		if x := o.exs[r.Exchange]; x != nil {
			resp := *r
			resp.Header = slices.Clone(r.Header)
			x.resp = &resp
		}
	case *End:
		x := o.exs[r.Exchange]
		if x == nil || r.Dir > ServerToClient {
			return
		}
		e := *r
		e.Tail = nil // body bytes belong to the part that carried them
		e.Trailer = slices.Clone(r.Trailer)
		x.ends[r.Dir] = &e
		if x.ends[ServerToClient] != nil && (x.ends[ClientToServer] != nil || x.req.Missing) {
			delete(o.exs, r.Exchange)
		}
	}
}

// Again returns copies of what is open, in the order it was announced:
// connections (each followed by its TLS record), then exchanges by number
// (request, response, ends).
func (o *OpenSet) Again() []Record {
	var again []Record
	for _, id := range sortedKeys(o.conns) {
		c := o.conns[id]
		conn := c.conn
		again = append(again, &conn)
		if c.tls != nil {
			t := *c.tls
			again = append(again, &t)
		}
	}
	for _, id := range sortedKeys(o.exs) {
		x := o.exs[id]
		req := x.req
		again = append(again, &req)
		if x.resp != nil {
			resp := *x.resp
			again = append(again, &resp)
		}
		for _, e := range x.ends {
			if e != nil {
				end := *e
				again = append(again, &end)
			}
		}
	}
	return again
}

// Announced reports whether r, at the start of a part, is a copy of the
// last announcement of something the part before left open (what Again
// returned when that part ended).
func (o *OpenSet) Announced(r Record) bool {
	switch r := r.(type) {
	case *Conn:
		c := o.conns[r.ID]
		return c != nil && c.conn == *r
	case *TLS:
		c := o.conns[r.Conn]
		return c != nil && c.tls != nil && *c.tls == *r
	case *Request:
		x := o.exs[r.Exchange]
		return x != nil && reflect.DeepEqual(emptyNilReq(x.req), emptyNilReq(*r))
	case *Response:
		x := o.exs[r.Exchange]
		return x != nil && x.resp != nil && reflect.DeepEqual(emptyNilResp(*x.resp), emptyNilResp(*r))
	case *End:
		x := o.exs[r.Exchange]
		if x == nil || r.Dir > ServerToClient || x.ends[r.Dir] == nil || len(r.Tail) > 0 {
			return false
		}
		return reflect.DeepEqual(emptyNilEnd(*x.ends[r.Dir]), emptyNilEnd(*r))
	}
	return false
}

// The reader gives back empty lists as nil; copies made while writing keep
// them: compare them alike.
func emptyNilReq(r Request) Request {
	if len(r.Header) == 0 {
		r.Header = nil
	}
	return r
}

func emptyNilResp(r Response) Response {
	if len(r.Header) == 0 {
		r.Header = nil
	}
	return r
}

func emptyNilEnd(e End) End {
	e.Tail = nil
	if len(e.Trailer) == 0 {
		e.Trailer = nil
	}
	if len(e.Redactions) == 0 {
		e.Redactions = nil
	}
	return e
}

func sortedKeys[K uint64 | int64, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}
