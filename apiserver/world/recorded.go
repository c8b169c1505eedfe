package world

import (
	"fmt"
	"strings"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/jsonscan"
)

// The replay serves recorded bytes; when clients' writes shifted the
// recorded resourceVersions (see the package doc), the ones it serves
// must carry the shifted numbers. ServeEvent, ServeObject and ServeList
// do that for a recorded watch event, a GET's body and a LIST's body:
// they move the world's point (Observe) and return the bytes to send —
// the recorded ones, untouched, while nothing was shifted.

// ServeEvent is Observe for a recorded watch event's exact bytes in format
// f. It returns data itself, or, with rewritten true, the event with its
// object's resourceVersion replaced (JSON: only that string changes;
// protobuf: the object is encoded again). ERROR events and events whose
// resourceVersion is not a number are returned as they are.
func (s *Store) ServeEvent(f frame.Format, data []byte) (out []byte, rewritten bool, err error) {
	m, err := frame.Peek(f, data)
	if err != nil || m.ResourceVersion == "" {
		return data, false, nil
	}
	served, changed := s.Observe(m.ResourceVersion)
	if !changed {
		return data, false, nil
	}
	if f == frame.JSON {
		if b, ok := replaceJSONRV(data, []string{"object", "metadata", "resourceVersion"}, served); ok {
			return b, true, nil
		}
	}
	av, kind, raw, err := frame.EventObject(f, data)
	if err != nil {
		return data, false, err
	}
	o, err := setRV(codec.Object{Format: f, APIVersion: av, Kind: kind, Raw: raw}, served)
	if err != nil {
		return data, false, err
	}
	return frame.WatchEvent(f, m.Type, o.APIVersion, o.Kind, o.Raw), true, nil
}

// ServeObject is ServeEvent for a whole body holding one object (a GET's).
func (s *Store) ServeObject(f frame.Format, body []byte) (out []byte, rewritten bool, err error) {
	o, err := codec.FromBody(f, body)
	if err != nil {
		return body, false, nil
	}
	rv, ok := objectRV(o)
	if !ok {
		return body, false, nil
	}
	served, changed := s.Observe(rv)
	if !changed {
		return body, false, nil
	}
	if f == frame.JSON {
		if b, ok := replaceJSONRV(body, []string{"metadata", "resourceVersion"}, served); ok {
			return b, true, nil
		}
	}
	o, err = setRV(o, served)
	if err != nil {
		return body, false, err
	}
	return codec.Body(o), true, nil
}

// ServeList is Observe for a recorded LIST body (decoded, format f) at
// its resourceVersion; items whose resourceVersions are shifted are served
// with the shifted ones, and then the whole list is encoded again.
func (s *Store) ServeList(f frame.Format, body []byte) (out []byte, rewritten bool, err error) {
	l, err := frame.ListItems(f, body)
	if err != nil || l.ResourceVersion == "" {
		return body, false, nil
	}
	listRV, changed := s.Observe(l.ResourceVersion)
	kind := strings.TrimSuffix(l.Kind, "List")
	items := make([]codec.Object, len(l.Items))
	s.mu.Lock()
	for i, it := range l.Items {
		items[i] = codec.Object{Format: f, APIVersion: l.APIVersion, Kind: kind, Raw: it}
		rv, ok := objectRV(items[i])
		if !ok {
			continue
		}
		n, ok := parseRV(rv)
		if !ok {
			continue
		}
		if sv := s.clk.served(n); sv != n {
			changed = true
			if items[i], err = setRV(items[i], formatRV(sv)); err != nil {
				s.mu.Unlock()
				return body, false, err
			}
		}
	}
	s.mu.Unlock()
	if !changed {
		return body, false, nil
	}
	w := codec.NewWriter(codec.Media{Format: f}, codec.TableOptions{}, nil)
	b, err := w.List(l.APIVersion, kind, codec.ListMeta{ResourceVersion: listRV, Continue: l.Continue}, items)
	if err != nil {
		return body, false, fmt.Errorf("state: re-encoding a %s: %w", l.Kind, err)
	}
	return b, true, nil
}

// objectRV reads an object's metadata.resourceVersion.
func objectRV(o codec.Object) (string, bool) {
	m, err := frame.PeekObject(o.Format, o.APIVersion, o.Kind, o.Raw)
	if err != nil || m.ResourceVersion == "" {
		return "", false
	}
	return m.ResourceVersion, true
}

// replaceJSONRV replaces the string at path (member names) in JSON text
// b with rv, leaving every other byte as it was.
func replaceJSONRV(b []byte, path []string, rv string) ([]byte, bool) {
	start, end := 0, len(b)
	for _, name := range path {
		found := false
		err := jsonscan.EachMember(b[start:end], func(key, val []byte, at int) bool {
			if jsonscan.KeyIs(key, name) {
				start, end, found = start+at, start+at+len(val), true
				return false
			}
			return true
		})
		if err != nil || !found {
			return nil, false
		}
	}
	if end-start < 2 || b[start] != '"' {
		return nil, false
	}
	out := make([]byte, 0, len(b)+len(rv))
	out = append(out, b[:start]...)
	out = jsonscan.AppendString(out, rv)
	return append(out, b[end:]...), true
}
