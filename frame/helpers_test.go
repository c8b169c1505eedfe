package frame

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// fixture is one entry of testdata/fixtures.json (see testdata/mkfixtures).
type fixture struct {
	Name        string `json:"name"`
	Scenario    string `json:"scenario"`
	ReqID       int    `json:"req_id"`
	Kind        string `json:"kind"` // watch, list, midstream
	ContentType string `json:"content_type"`
	Request     string `json:"request"`
	File        string `json:"file"`
	Size        int    `json:"size"`
	BodyOffset  int64  `json:"body_offset"`
}

// truthEvent is one line of testdata/truth.jsonl: the corpus truth of an
// event in a fixture body.
type truthEvent struct {
	Fixture         string `json:"fixture"`
	Index           int    `json:"index"`
	Type            string `json:"type"`
	Kind            string `json:"kind"`
	APIVersion      string `json:"apiVersion"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
	EventLen        int    `json:"event_len"`
	EventSHA256     string `json:"event_sha256"`
	ObjectSHA256    string `json:"object_sha256"`
	BodyOffset      int64  `json:"body_offset"`
	BodyEnd         int64  `json:"body_end"`
	StatusCode      int32  `json:"status_code"`
	StatusReason    string `json:"status_reason"`
	StatusMessage   string `json:"status_message"`
	InCapture       *bool  `json:"in_capture"`
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx []fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

func fixtureNamed(t testing.TB, name string) fixture {
	t.Helper()
	for _, f := range loadFixtures(t) {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no fixture %q", name)
	return fixture{}
}

func (f fixture) body(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", f.File))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != f.Size {
		t.Fatalf("%s: %d bytes, fixtures.json says %d", f.File, len(b), f.Size)
	}
	return b
}

// format is the fixture's format; a LIST body is in its watch format's
// encoding, so ask as if for a watch.
func (f fixture) format() Format { return FormatOf(f.ContentType, true) }

var truthCache map[string][]truthEvent

func truthFor(t testing.TB, name string) []truthEvent {
	t.Helper()
	if truthCache == nil {
		b, err := os.ReadFile("testdata/truth.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		truthCache = map[string][]truthEvent{}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var e truthEvent
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatal(err)
			}
			truthCache[e.Fixture] = append(truthCache[e.Fixture], e)
		}
	}
	return truthCache[name]
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// got is a copied event.
type got struct {
	Offset    int64
	Pre, Data []byte
}

// result is everything a split produced.
type result struct {
	events  []got
	tail    []byte
	err     error // first Next error, or End's
	skipped int64
}

// piecer cuts a body into the pieces a test feeds.
type piecer func(body []byte) [][]byte

func oneShot(body []byte) [][]byte { return [][]byte{body} }

func fixed(n int) piecer {
	return func(body []byte) [][]byte {
		var ps [][]byte
		for len(body) > 0 {
			k := min(n, len(body))
			ps = append(ps, body[:k])
			body = body[k:]
		}
		return ps
	}
}

func random(seed uint64, maxPiece int) piecer {
	return func(body []byte) [][]byte {
		r := rand.New(rand.NewPCG(seed, 7))
		var ps [][]byte
		for len(body) > 0 {
			k := min(1+r.IntN(maxPiece), len(body))
			ps = append(ps, body[:k])
			body = body[k:]
		}
		return ps
	}
}

var piecers = []struct {
	name string
	cut  piecer
}{
	{"one-shot", oneShot},
	{"byte-at-a-time", fixed(1)},
	{"fixed-7", fixed(7)},
	{"fixed-1448", fixed(1448)},
	{"random-small", random(1, 16)},
	{"random-large", random(2, 70000)},
	{"random-mixed", random(3, 3000)},
}

// split feeds pieces to s. With resync, it calls Resync after each error and
// goes on; else it stops at the first error.
func split(s *Splitter, pieces [][]byte, resync bool) result {
	var r result
	var scratch []byte
	for _, p := range pieces {
		// Copy each piece into one reused buffer, as a capture would, so
		// that a splitter keeping a reference to an earlier piece is caught.
		scratch = append(scratch[:0], p...)
		p = scratch
		for len(p) > 0 {
			n, ev, ok, err := s.Next(p)
			if n < 0 || n > len(p) {
				panic("Next consumed out of range")
			}
			p = p[n:]
			if ok {
				r.events = append(r.events, got{ev.Offset, bytes.Clone(ev.Pre), bytes.Clone(ev.Data)})
			}
			if err != nil {
				if r.err == nil {
					r.err = err
				}
				if !resync {
					r.skipped = s.Skipped()
					return r
				}
				s.Resync()
			} else if n == 0 && !ok {
				panic("Next made no progress")
			}
		}
	}
	tail, err := s.End()
	r.tail = bytes.Clone(tail)
	if r.err == nil {
		r.err = err
	}
	r.skipped = s.Skipped()
	return r
}
