package formats_test

import (
	"bytes"
	"fmt"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

func Example() {
	var buf bytes.Buffer
	w, err := formats.NewWriter(&buf, formats.WriterOptions{})
	if err != nil {
		panic(err)
	}
	for _, r := range []formats.Record{
		&formats.Meta{Tool: "example"},
		&formats.Conn{ID: 0, Client: "127.0.0.1:50000", Server: "127.0.0.1:8001"},
		&formats.Request{Exchange: 0, Conn: 0, Method: "GET", Target: "/api/v1/pods?watch=true"},
		&formats.Response{Exchange: 0, Status: 200, Events: frame.JSON},
		&formats.Frame{Exchange: 0, Data: []byte(`{"type":"ADDED","object":{}}`)},
		&formats.End{Exchange: 0, Dir: formats.ServerToClient},
		&formats.Summary{Exchanges: 1, Events: 1},
	} {
		if err := w.Write(r); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	f, err := formats.OpenReaderAt(bytes.NewReader(buf.Bytes()), int64(buf.Len()), formats.ReaderOptions{})
	if err != nil {
		panic(err)
	}
	x := f.Index().Exchanges[0]
	fmt.Println(f.Clean(), x.Request.Method, x.Request.Target, x.Frames, x.FrameTypes)
	for r, err := range f.ExchangeRecords(0).All() {
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Type())
	}
	// Output:
	// true GET /api/v1/pods?watch=true 1 map[ADDED:1]
	// request
	// response
	// frame
	// end
}
