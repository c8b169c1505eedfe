package capture_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
)

// maxFuzzInput bounds each direction's bytes in FuzzTee.
const maxFuzzInput = 8 << 10

// fuzzDir is a temporary directory, in memory when /dev/shm exists
// (rotations fsync each file they close).
func fuzzDir(t *testing.T) string {
	d, err := os.MkdirTemp("/dev/shm", "wtrace-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// FuzzTee feeds arbitrary client and server bytes, in pieces, through a
// Tee into a FileSink that rotates at a tiny size: nothing panics, every
// part is closed cleanly, and every Frame, Body, Chunk and End in a part
// belongs to an exchange whose Request that part announces.
func FuzzTee(f *testing.F) {
	var resp []byte
	resp = append(resp, watchHead...)
	for _, e := range watchEvents(12) {
		resp = append(resp, chunk(e+"\n")...)
	}
	f.Add([]byte(watchRequest), append(resp, "0\r\n\r\n"...), uint8(7), uint16(300))
	f.Add([]byte(watchRequest+watchRequest), resp, uint8(0), uint16(1))
	f.Add([]byte("POST /api/v1/namespaces/x/secrets HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"), []byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"), uint8(2), uint16(50))
	f.Add([]byte("\x16\x03\x01garbage"), []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, req, resp []byte, split uint8, maxSize uint16) {
		// Bounded inputs keep each run short: every rotation is a new file.
		req, resp = req[:min(len(req), maxFuzzInput)], resp[:min(len(resp), maxFuzzInput)]
		path := filepath.Join(fuzzDir(t), "s.wt")
		fs, err := formats.NewFileSink(formats.FileSinkOptions{Path: path, Meta: formats.Meta{Tool: "fuzz"}, Rotate: true,
			MaxSize: int64(maxSize) + 1, Writer: formats.WriterOptions{BlockSize: 256}})
		if err != nil {
			t.Fatal(err)
		}
		tee := capture.NewTee(fs, capture.TeeOptions{})
		c := tee.Conn("127.0.0.1:1", "127.0.0.1:2", "http/1.1")
		n := int(split) + 1
		for len(req) > 0 || len(resp) > 0 {
			k := min(n, len(req))
			c.Data(formats.ClientToServer, req[:k])
			req = req[k:]
			k = min(n, len(resp))
			c.Data(formats.ServerToClient, resp[:k])
			resp = resp[k:]
		}
		c.Close(formats.ConnClosed)
		if err := tee.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fs.Close(formats.Ending{}); err != nil {
			t.Fatal(err)
		}
		for _, name := range fs.Names() {
			file, err := formats.Open(name, formats.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !file.Clean() {
				t.Fatalf("%s not clean: %v", name, file.Problems())
			}
			known := map[int64]bool{}
			for r, err := range file.Records().All() {
				if err != nil {
					t.Fatal(err)
				}
				var x int64 = -1
				switch r := r.(type) {
				case *formats.Request:
					known[r.Exchange] = true
				case *formats.Frame:
					x = r.Exchange
				case *formats.Body:
					x = r.Exchange
				case *formats.Chunk:
					x = r.Exchange
				case *formats.End:
					x = r.Exchange
				}
				if x >= 0 && !known[x] {
					t.Fatalf("%s: %T of exchange %d, whose Request the part does not hold", name, r, x)
				}
			}
			file.Close()
		}
	})
}
