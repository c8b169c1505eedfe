package formats

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// TestSpillIndex writes a session whose connections and exchanges finish
// out of the order of their IDs, some named again by records after they
// finished, with an index large enough to be compressed as a stream, and
// checks that the index the Writer wrote says exactly what an index
// rebuilt from the records says.
func TestSpillIndex(t *testing.T) {
	for _, inline := range []int{inlineIndex, 4 << 10} {
		t.Run(fmt.Sprint("inline ", inline), func(t *testing.T) {
			defer func(v int) { inlineIndex = v }(inlineIndex)
			inlineIndex = inline
			var buf bytes.Buffer
			w, err := NewWriter(&buf, WriterOptions{BlockSize: 16 << 10})
			if err != nil {
				t.Fatal(err)
			}
			must := func(r Record) {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			must(&Meta{Tool: "test"})
			const conns, perConn = 40, 100
			t0 := int64(1795000000000000000)
			for c := range conns {
				must(&Conn{ID: uint64(c), Time: t0, Client: fmt.Sprintf("127.0.0.1:%d", 40000+c), Server: "127.0.0.1:8001", Proto: "http/1.1"})
			}
			id := int64(0)
			for i := range perConn {
				for c := range conns {
					x := id
					id++
					tm := t0 + x*1000
					must(&Request{Exchange: x, Conn: uint64(c), Time: tm, Method: "GET", Target: fmt.Sprintf("/api/v1/pods/p-%d", x), Proto: "HTTP/1.1",
						Header: []Header{{Name: "Accept", Value: "application/json"}}})
					must(&Response{Exchange: x, Time: tm + 1, Proto: "HTTP/1.1", Status: 200, Events: 1})
					must(&Frame{Exchange: x, Time: tm + 2, Data: []byte(`{"type":"ADDED","object":{}}`)})
					must(&End{Exchange: x, Dir: ClientToServer, Time: tm + 3})
					if (c+i)%7 != 0 { // the others end later, out of order
						must(&End{Exchange: x, Dir: ServerToClient, Time: tm + 4})
					}
					if x%97 == 5 && x > 2500 { // a late record names a finished exchange
						must(&Anomaly{Conn: uint64(c), Exchange: x - 2500, Time: tm + 5, Kind: AnomalyGap, Message: "late"})
					}
				}
			}
			for x := int64(0); x < id; x++ {
				if int(x/conns+x%conns)%7 == 0 {
					must(&End{Exchange: x, Dir: ServerToClient, Time: t0 + id*1000})
				}
			}
			for c := range conns {
				must(&ConnEnd{Conn: uint64(c), Time: t0 + id*1000, Reason: ConnFIN})
				if c%5 == 0 { // named after its end
					must(&Anomaly{Conn: uint64(c), Exchange: NoExchange, Time: t0 + id*1000, Kind: AnomalyLimit, Message: "after"})
				}
			}
			must(&Summary{Conns: conns, Exchanges: id})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			file := buf.Bytes()
			f, err := OpenReaderAt(bytes.NewReader(file), int64(len(file)), ReaderOptions{})
			if err != nil || !f.Clean() {
				t.Fatalf("open: %v, problems %v", err, f.Problems())
			}
			// The same file without its footer: the index is rebuilt from
			// the records.
			cut := file[:len(file)-footerSize]
			g, err := OpenReaderAt(bytes.NewReader(cut), int64(len(cut)), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, want := f.Index(), g.Index()
			if len(got.Exchanges) != int(id) || len(got.Conns) != conns {
				t.Fatalf("index: %d exchanges, %d conns; want %d, %d", len(got.Exchanges), len(got.Conns), id, conns)
			}
			if !reflect.DeepEqual(got.Conns, want.Conns) {
				t.Errorf("connections differ from the rebuilt index")
			}
			for i := range want.Exchanges {
				if !reflect.DeepEqual(got.Exchanges[i], want.Exchanges[i]) {
					t.Fatalf("exchange %d:\n got %+v\nwant %+v", i, got.Exchanges[i], want.Exchanges[i])
				}
			}
			if !reflect.DeepEqual(got.Blocks, want.Blocks) || !reflect.DeepEqual(got.Anomalies, want.Anomalies) {
				t.Errorf("blocks or anomalies differ from the rebuilt index")
			}
		})
	}
}
