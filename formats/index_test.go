package formats

import (
	"bytes"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

func open(t testing.TB, data []byte) *File {
	t.Helper()
	f, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), ReaderOptions{})
	if err != nil {
		t.Fatalf("OpenReaderAt: %v", err)
	}
	return f
}

func TestIndex(t *testing.T) {
	const frames = 30
	recs := session(frames, 400, 100*time.Millisecond)
	data := encode(t, recs, WriterOptions{BlockSize: 4000}, false)
	f := open(t, data)
	idx := f.Index()

	blocks, indexOff := blockSpans(t, data)
	if !reflect.DeepEqual(idx.Blocks, blocks) {
		t.Errorf("Index().Blocks = %+v; want %+v", idx.Blocks, blocks)
	}
	if n := len(blocks); n < 3 || blocks[n-1].Offset+blocks[n-1].Size != indexOff {
		t.Errorf("%d blocks ending at %d; want several, ending at the index (%d)", n, blocks[n-1].Offset+blocks[n-1].Size, indexOff)
	}
	if !reflect.DeepEqual(idx.Meta, recs[0]) {
		t.Errorf("Index().Meta = %+v; want %+v", idx.Meta, recs[0])
	}
	if !reflect.DeepEqual(idx.Summary, recs[len(recs)-1]) {
		t.Errorf("Index().Summary = %+v; want %+v", idx.Summary, recs[len(recs)-1])
	}

	// Expected exchange info, computed from the records independently.
	type want struct {
		frames, chunks, bodyBytes int64
		types                     map[string]int64
		first, last               int64
		anomalies                 int
	}
	wants := map[int64]*want{}
	blocksOf := map[int64][]int{}
	recIdx := 0
	for bi, b := range blocks {
		for range b.Records {
			r := recs[recIdx]
			recIdx++
			ex, ok := recordExchangeOf(r)
			if !ok {
				continue
			}
			w := wants[ex]
			tm, _ := recordTime(r)
			if w == nil {
				w = &want{first: tm, last: tm}
				wants[ex] = w
			}
			w.first, w.last = min(w.first, tm), max(w.last, tm)
			if l := blocksOf[ex]; len(l) == 0 || l[len(l)-1] != bi {
				blocksOf[ex] = append(l, bi)
			}
			switch r := r.(type) {
			case *Frame:
				w.frames++
				w.bodyBytes += int64(len(r.Pre) + len(r.Data))
				if w.types == nil {
					w.types = map[string]int64{}
				}
				w.types[eventTypes[(r.Seq*2+r.Exchange-1)%int64(len(eventTypes))]]++
			case *Chunk:
				w.chunks++
			case *Body:
				w.bodyBytes += int64(len(r.Data))
			case *End:
				w.bodyBytes += int64(len(r.Tail))
			case *Anomaly:
				w.anomalies++
			}
		}
	}
	if len(idx.Exchanges) != 3 {
		t.Fatalf("%d exchanges; want 3", len(idx.Exchanges))
	}
	for i, x := range idx.Exchanges {
		id := x.Request.Exchange
		w := wants[id]
		if id != int64(i) || x.Request.Missing || x.Response == nil || x.End == nil || x.RequestEnd != nil {
			t.Errorf("exchange %d: request %+v response %v end %v requestEnd %v", i, x.Request, x.Response, x.End, x.RequestEnd)
		}
		got := want{x.Frames, x.Chunks, x.BodyBytes, x.FrameTypes, x.First, x.Last, x.Anomalies}
		if !reflect.DeepEqual(&got, w) {
			t.Errorf("exchange %d = %+v; want %+v", id, got, *w)
		}
		if !reflect.DeepEqual(x.Blocks, blocksOf[id]) {
			t.Errorf("exchange %d Blocks = %v; want %v", id, x.Blocks, blocksOf[id])
		}
		if x.End != nil && x.End.Tail != nil {
			t.Errorf("exchange %d End.Tail = %q; want nil in the index", id, x.End.Tail)
		}
	}
	if got := idx.Exchanges[0].Request.Header; len(got) != 2 || got[1].Name != "Authorization" || !got[1].Redacted {
		t.Errorf("exchange 0 request headers = %+v; want them kept", got)
	}
	if got := idx.Exchanges[1].FrameTypes; got["ADDED"] == 0 || got["BOOKMARK"] == 0 {
		t.Errorf("JSON frame types = %v", got)
	}
	if got := idx.Exchanges[2].FrameTypes; got["MODIFIED"] == 0 || got["DELETED"] == 0 {
		t.Errorf("protobuf frame types = %v", got)
	}

	wantConns := []ConnInfo{
		{Conn: *recs[1].(*Conn), End: recs[len(recs)-3].(*ConnEnd), Exchanges: []int64{0, 1}, Anomalies: 1},
		{Conn: *recs[2].(*Conn), End: recs[len(recs)-2].(*ConnEnd), Exchanges: []int64{2}, Anomalies: 1},
	}
	if !reflect.DeepEqual(idx.Conns, wantConns) {
		t.Errorf("Conns = %+v; want %+v", idx.Conns, wantConns)
	}
	if len(idx.Anomalies) != 2 || idx.Anomalies[1].Exchange != NoExchange {
		t.Errorf("Anomalies = %+v", idx.Anomalies)
	}

	// The index a scan rebuilds equals the stored one.
	cut := open(t, data[:indexOff])
	if cut.Clean() || len(cut.Problems()) != 1 {
		t.Errorf("without index: Clean() = %v, Problems() = %v; want false, one note", cut.Clean(), cut.Problems())
	}
	if !reflect.DeepEqual(cut.Index(), idx) {
		t.Errorf("rebuilt index differs from stored:\n got  %+v\n want %+v", cut.Index(), idx)
	}
}

// recordExchangeOf returns the exchange of r, if it names one.
func recordExchangeOf(r Record) (int64, bool) {
	body, _ := appendBody(nil, r)
	ex, ok := recordExchange(r.Type(), body)
	if a, isA := r.(*Anomaly); isA && a.Exchange == NoExchange {
		return 0, false
	}
	return ex, ok
}

func TestIndexRobust(t *testing.T) {
	// Records naming exchanges and connections nothing announced.
	recs := []Record{
		&Meta{},
		&Frame{Exchange: 9, Time: 5, Data: []byte(`{"type":"ADDED"}`)},
		&Anomaly{Conn: 4, Exchange: 8, Time: 3, Kind: AnomalyGap},
		&TLS{Conn: 5, Time: 2},
		&Frame{Exchange: 9, Time: 1, Data: []byte(`garbage`)},
		&Request{Exchange: 8, Conn: 4, Time: 4, Method: "GET"},
		&Body{Exchange: 8, Dir: ClientToServer, Time: 6, Data: []byte("request body")},
		&End{Exchange: 8, Dir: ClientToServer, Time: 7, Tail: []byte("x")},
	}
	idx := open(t, encode(t, recs, WriterOptions{}, false)).Index()
	wantEx := []ExchangeInfo{
		{Request: Request{Exchange: 8, Conn: 4, Time: 4, Method: "GET"}, RequestEnd: &End{Exchange: 8, Time: 7},
			First: 3, Last: 7, Blocks: []int{0}, Anomalies: 1},
		{Request: Request{Exchange: 9, Missing: true}, Frames: 2, FrameTypes: map[string]int64{"ADDED": 1},
			BodyBytes: int64(len(`{"type":"ADDED"}`) + len("garbage")), First: 1, Last: 5, Blocks: []int{0}},
	}
	if !reflect.DeepEqual(idx.Exchanges, wantEx) {
		t.Errorf("Exchanges = %+v;\n want %+v", idx.Exchanges, wantEx)
	}
	wantConns := []ConnInfo{
		{Conn: Conn{ID: 4}, Exchanges: []int64{8}, Anomalies: 1},
		{Conn: Conn{ID: 5}, TLS: &TLS{Conn: 5, Time: 2}},
	}
	if !reflect.DeepEqual(idx.Conns, wantConns) {
		t.Errorf("Conns = %+v;\n want %+v", idx.Conns, wantConns)
	}
	if idx.Summary != nil {
		t.Errorf("Summary = %+v; want nil", idx.Summary)
	}
}

func TestExchangeRecords(t *testing.T) {
	recs := session(60, 500, 50*time.Millisecond)
	data := encode(t, recs, WriterOptions{BlockSize: 3000}, false)
	f := open(t, data)
	for _, ids := range [][]int64{{0}, {1}, {2}, {1, 2}, {0, 2, 99}, {99}, {}} {
		var want []Record
		for _, r := range recs {
			if ex, ok := recordExchangeOf(r); ok && slices.Contains(ids, ex) {
				want = append(want, normalize(r))
			}
		}
		got, damage, err := drain(t, f.ExchangeRecords(ids...))
		if err != nil || len(damage) > 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("ExchangeRecords(%v): %d records, %v, %v; want %d\n%s", ids, len(got), err, damage, len(want), diffRecords(got, want))
		}
	}
	// Exchange 0 lives in the first block only: the others are never read.
	if b := f.Index().Exchanges[0].Blocks; !reflect.DeepEqual(b, []int{0}) {
		t.Errorf("exchange 0 blocks = %v; want [0]", b)
	}
}

func TestConcurrentScanners(t *testing.T) {
	recs := session(200, 600, 10*time.Millisecond)
	data := encode(t, recs, WriterOptions{BlockSize: 5000}, false)
	f := open(t, data)
	want, _, _ := drain(t, f.ExchangeRecords(1))
	done := make(chan error)
	for range 8 {
		go func() {
			got, damage, err := drain(t, f.ExchangeRecords(1))
			if err == nil && (len(damage) > 0 || !reflect.DeepEqual(got, want)) {
				err = errDiffer
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Errorf("concurrent ExchangeRecords(1): %v", err)
		}
	}
}

var errDiffer = errorString("records differ")

type errorString string

func (e errorString) Error() string { return string(e) }

func TestBlockCutting(t *testing.T) {
	const sec = int64(time.Second)
	timed := func(times ...int64) []Record {
		recs := []Record{&Meta{}}
		for i, tm := range times {
			recs = append(recs, &Conn{ID: uint64(i), Time: tm})
		}
		return recs
	}
	tests := []struct {
		name   string
		opts   WriterOptions
		recs   []Record
		blocks []BlockInfo // Offset and Size ignored
	}{
		{"by time", WriterOptions{}, timed(0, sec/2, sec-1, sec, 3*sec, 2*sec, 4*sec-1, 4*sec),
			[]BlockInfo{{Records: 4, First: 0, Last: sec - 1}, {Records: 1, First: sec, Last: sec},
				{Records: 3, First: 2 * sec, Last: 4*sec - 1}, {Records: 1, First: 4 * sec, Last: 4 * sec}}},
		{"interval", WriterOptions{BlockInterval: 10 * time.Second}, timed(0, 9*sec, 10*sec),
			[]BlockInfo{{Records: 3, First: 0, Last: 9 * sec}, {Records: 1, First: 10 * sec, Last: 10 * sec}}},
		{"no time cut", WriterOptions{BlockInterval: -1}, timed(0, 100*sec, 200*sec),
			[]BlockInfo{{Records: 4, First: 0, Last: 200 * sec}}},
		{"untimed meta", WriterOptions{}, []Record{&Meta{Recorded: 99 * sec}},
			[]BlockInfo{{Records: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := blockSpans(t, encode(t, tt.recs, tt.opts, false))
			for i := range got {
				got[i].Offset, got[i].Size = 0, 0
			}
			if !reflect.DeepEqual(got, tt.blocks) {
				t.Errorf("blocks = %+v; want %+v", got, tt.blocks)
			}
		})
	}

	t.Run("by size", func(t *testing.T) {
		const size = 5000
		recs := session(100, 700, 0)
		data := encode(t, recs, WriterOptions{BlockSize: size}, false)
		br := newBlockReader(bytes.NewReader(data[fileHeaderSize:]), fileHeaderSize, true)
		var ulens []int
		for {
			blk, err := br.next()
			if err != nil {
				break
			}
			ulens = append(ulens, blk.hdr.ulen)
		}
		for i, n := range ulens {
			// Cut after the record that reaches size; a record is < 1 KiB.
			if n > size+1024 || i < len(ulens)-1 && n < size {
				t.Errorf("block %d of %d: %d bytes uncompressed; want [%d, %d]", i, len(ulens), n, size, size+1024)
			}
		}
		if len(ulens) < 10 {
			t.Errorf("%d blocks; want > 10", len(ulens))
		}
	})
}

// lockedBuffer is a bytes.Buffer the Writer's background goroutine writes
// while the test reads its length.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func TestWriterSize(t *testing.T) {
	var buf lockedBuffer // the Writer compresses and writes in the background
	w, err := NewWriter(&buf, WriterOptions{BlockSize: 10000})
	if err != nil {
		t.Fatal(err)
	}
	prev := w.Size()
	if prev != fileHeaderSize {
		t.Errorf("Size() of a new file = %d; want %d", prev, fileHeaderSize)
	}
	for _, r := range session(50, 500, 0) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		s := w.Size()
		if s < int64(buf.Len()) {
			t.Errorf("Size() = %d < %d bytes written", s, buf.Len())
		}
		prev = s
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Errorf("Size() after Close = %d; want %d", w.Size(), buf.Len())
	}
}

// TestRecordsFrom: RecordsFrom(t) reads every record timed t or later, in
// file order, and skips the blocks that end before t.
func TestRecordsFrom(t *testing.T) {
	recs := session(60, 500, 50*time.Millisecond)
	data := encode(t, recs, WriterOptions{BlockSize: 3000}, false)
	f := open(t, data)
	all, _, err := drain(t, f.Records())
	if err != nil {
		t.Fatal(err)
	}
	blocks := f.Index().Blocks
	if len(blocks) < 4 {
		t.Fatalf("%d blocks; the test wants several", len(blocks))
	}
	for _, at := range []int64{0, blocks[1].First, blocks[2].Last, blocks[len(blocks)-1].Last, blocks[len(blocks)-1].Last + 1} {
		got, damage, err := drain(t, f.RecordsFrom(at))
		if err != nil || len(damage) > 0 {
			t.Fatalf("RecordsFrom(%d): %v %v", at, err, damage)
		}
		var want []Record
		for _, r := range all {
			if tm, ok := recordTime(r); ok && tm >= at {
				want = append(want, r)
			}
		}
		var gotTimed []Record
		for _, r := range got {
			if tm, ok := recordTime(r); ok && tm >= at {
				gotTimed = append(gotTimed, r)
			}
		}
		if !reflect.DeepEqual(gotTimed, want) {
			t.Errorf("RecordsFrom(%d): %d records at or after it; want %d\n%s", at, len(gotTimed), len(want), diffRecords(gotTimed, want))
		}
		if at > blocks[0].Last && len(got) >= len(all) {
			t.Errorf("RecordsFrom(%d) read all %d records: no block skipped", at, len(got))
		}
	}
}
