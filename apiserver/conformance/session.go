package conformance

import (
	"os"
	"time"

	"github.com/wtrace/wtrace/formats"
)

// List is one recorded LIST: its request target and its JSON answer.
type List struct {
	Target string
	Body   []byte
}

// WriteSession writes a session at path whose exchanges are lists,
// answered 200 with JSON as by the apiserver they were read from: what a
// replay's world starts from. Its source is synthetic: no client of it is
// a client under test, so every object is the world's from the start.
func WriteSession(path string, lists []List) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		return err
	}
	recs := []formats.Record{&formats.Meta{Tool: "wtrace conformance", Source: "synthetic"}}
	at := time.Now().UnixNano()
	for i, l := range lists {
		id := int64(i)
		recs = append(recs,
			&formats.Conn{ID: uint64(i), Time: at, Client: "127.0.0.1:50000", Server: "127.0.0.1:6443", Proto: "http/1.1"},
			&formats.Request{Exchange: id, Conn: uint64(i), Time: at, Method: "GET", Target: l.Target, Proto: "HTTP/1.1"},
			&formats.End{Exchange: id, Dir: formats.ClientToServer, Time: at},
			&formats.Response{Exchange: id, Time: at + 1, Proto: "HTTP/1.1", Status: 200,
				Header: []formats.Header{{Name: "Content-Type", Value: mediaJSON}}, Framing: formats.FramingLength},
			&formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: at + 2, Data: l.Body},
			&formats.End{Exchange: id, Dir: formats.ServerToClient, Time: at + 3, Status: formats.EndComplete, Size: int64(len(l.Body))})
		at += int64(time.Millisecond)
	}
	recs = append(recs, &formats.Summary{})
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return file.Close()
}
