package chunked

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
	"testing/iotest"
)

func httputilDecode(tb testing.TB, in []byte) []byte {
	tb.Helper()
	b, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in)))
	if err != nil {
		tb.Fatalf("httputil: %v", err)
	}
	return b
}

func TestReaderValid(t *testing.T) {
	for _, tt := range validTests {
		if tt.name == "largest chunk size" {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(tt.in) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.in)) },
				"data+err": func() io.Reader { return iotest.DataErrReader(strings.NewReader(tt.in)) },
				"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(tt.in)) },
			}
			for name, src := range readers {
				r := NewReader(src())
				got, err := io.ReadAll(r)
				if err != nil || string(got) != tt.data || !equalSlices(r.Trailer(), tt.trailers) {
					t.Errorf("ReadAll(%s %q) = %q, %v, trailers %q; want %q, nil, %q", name, tt.in, got, err, r.Trailer(), tt.data, tt.trailers)
				}
				if n, err := r.Read(make([]byte, 10)); n != 0 || err != io.EOF {
					t.Errorf("Read after EOF = %d, %v; want 0, EOF", n, err)
				}
			}
		})
	}
}

func TestReaderInvalid(t *testing.T) {
	for _, tt := range invalidTests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				r := NewReader(src)
				_, err := io.ReadAll(r)
				if e := asError(err); e == nil || !errors.Is(err, tt.sentinel) || e.Offset != tt.offset {
					t.Fatalf("ReadAll(%q) = %v; want %v at offset %d", tt.in, err, tt.sentinel, tt.offset)
				}
				if _, err2 := r.Read(make([]byte, 1)); err2 != err {
					t.Errorf("Read after error = %v; want sticky %v", err2, err)
				}
			}
		})
	}
}

// TestReaderIncomplete: every truncation is io.ErrUnexpectedEOF, as in
// net/http's TestIncompleteChunk (but the trailer section is required).
func TestReaderIncomplete(t *testing.T) {
	const valid = "4\r\nabcd\r\n" + "5\r\nabc\r\n\r\n" + "0\r\n\r\n"
	for i := 0; i < len(valid); i++ {
		if _, err := io.ReadAll(NewReader(strings.NewReader(valid[:i]))); err != io.ErrUnexpectedEOF {
			t.Errorf("ReadAll(%q) = %v; want io.ErrUnexpectedEOF", valid[:i], err)
		}
	}
	if got, err := io.ReadAll(NewReader(strings.NewReader(valid))); err != nil || string(got) != "abcdabc\r\n" {
		t.Errorf("ReadAll(%q) = %q, %v", valid, got, err)
	}
}

// TestReaderPartial: Read returns what it has instead of blocking for the
// next chunk header (net/http issue 17355).
func TestReaderPartial(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("7\r\n1234567"))
		pw.Write([]byte("\r\n3\r\nabc"))
		pw.Write([]byte("xx"))
	}()
	r := NewReader(pr)
	buf := make([]byte, 100)
	for _, want := range []string{"1234567", "abc"} {
		n, err := r.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("Read = %q, %v; want %q", buf[:n], err, want)
		}
	}
	if _, err := r.Read(buf); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Read = %v; want malformed", err)
	}
}

func TestReaderSourceErrors(t *testing.T) {
	readErr := errors.New("source broke")
	tests := []struct {
		name string
		src  io.Reader
		want error
	}{
		{"error after data", io.MultiReader(strings.NewReader("4\r\nabcd"), iotest.ErrReader(readErr)), readErr},
		{"error with data", &funcReader{f: func(int) ([]byte, error) { return []byte("4\r\nab"), readErr }}, readErr},
		{"no progress", &funcReader{f: func(int) ([]byte, error) { return nil, nil }}, io.ErrNoProgress},
		{"EOF in large chunk", strings.NewReader("8000\r\n" + strings.Repeat("x", 10000)), io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := io.ReadAll(NewReader(tt.src)); err != tt.want {
				t.Errorf("ReadAll = %v; want %v", err, tt.want)
			}
		})
	}
}

// TestReaderFixtures: identical bytes to httputil for the real bodies,
// whatever the caller's buffer size (small, direct-read sized, odd).
func TestReaderFixtures(t *testing.T) {
	for _, name := range []string{"basic-json-watch.chunked", "large-objects-watch.chunked"} {
		in := readFixture(t, name)
		want := httputilDecode(t, in)
		sources := map[string]func() io.Reader{
			"bytes":   func() io.Reader { return bytes.NewReader(in) },
			"half":    func() io.Reader { return iotest.HalfReader(bytes.NewReader(in)) },
			"dataerr": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(in)) },
			"odd":     func() io.Reader { return &funcReader{f: oddPieces(in)} },
		}
		for _, size := range []int{1, 100, 4095, 4096, 32 << 10, 100000} {
			for srcName, src := range sources {
				if size == 1 && srcName != "bytes" {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%d", name, srcName, size), func(t *testing.T) {
					r := NewReader(src())
					var got []byte
					buf := make([]byte, size)
					for {
						n, err := r.Read(buf)
						got = append(got, buf[:n]...)
						if err == io.EOF {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("Read(%s) with %d-byte buffer: %d bytes differ from httputil's %d", name, size, len(got), len(want))
					}
				})
			}
		}
	}
}

func TestReaderAllocs(t *testing.T) {
	in := readFixture(t, "large-objects-watch.chunked")
	src := bytes.NewReader(in)
	r := NewReader(src)
	buf := make([]byte, 32<<10)
	allocs := testing.AllocsPerRun(10, func() {
		src.Reset(in)
		r.Reset(src)
		for {
			_, err := r.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per body; want 0", allocs)
	}
}

// oddPieces serves in in pieces of 1, 2, 3, ... 997 bytes, cycling, so
// that lines and CRLFs are cut everywhere.
func oddPieces(in []byte) func(int) ([]byte, error) {
	return func(i int) ([]byte, error) {
		n := min(i%997+1, len(in))
		p := in[:n]
		in = in[n:]
		if len(in) == 0 {
			return p, io.EOF
		}
		return p, nil
	}
}
