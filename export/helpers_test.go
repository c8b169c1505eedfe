package export

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// scenario is a corpus capture of a real kube-apiserver.
type scenario struct{ name, pcap string }

// scenarios returns the captures of testdata/corpus and, when present,
// of ../shared/corpus that testdata/corpus lacks.
func scenarios(t testing.TB) []scenario {
	t.Helper()
	root, err := wttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out []scenario
	seen := map[string]bool{}
	for _, dir := range []string{filepath.Join(root, "testdata", "corpus"), filepath.Join(root, "..", "shared", "corpus")} {
		pcaps, _ := filepath.Glob(filepath.Join(dir, "*", "capture.pcap"))
		for _, p := range pcaps {
			name := filepath.Base(filepath.Dir(p))
			if !seen[name] {
				seen[name] = true
				out = append(out, scenario{name, p})
			}
		}
	}
	if len(out) == 0 {
		t.Skip("no corpus captures")
	}
	return out
}

// record returns a session of the scenario (keep: Secret values kept),
// recorded once per test binary.
func record(t testing.TB, sc scenario, keep bool) string {
	t.Helper()
	key := fmt.Sprintf("%s-%v", sc.name, keep)
	recMu.Lock()
	defer recMu.Unlock()
	if p, ok := recorded[key]; ok {
		return p
	}
	out := filepath.Join(recDir, key+".wt")
	if _, err := wttest.RecordPcap(sc.pcap, out, capture.Options{KeepSecrets: keep}); err != nil {
		t.Fatalf("recording %s: %v", sc.pcap, err)
	}
	recorded[key] = out
	return out
}

// recordPcap records a capture file into a session of t's temporary
// directory.
func recordPcap(t testing.TB, pcap string, keep bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "again.wt")
	if _, err := wttest.RecordPcap(pcap, out, capture.Options{KeepSecrets: keep}); err != nil {
		t.Fatalf("recording %s: %v", pcap, err)
	}
	return out
}

var (
	recMu    sync.Mutex
	recorded = map[string]string{}
	recDir   string
)

func TestMain(m *testing.M) {
	var err error
	if recDir, err = os.MkdirTemp("", "wtrace-export-test"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(recDir)
	os.Exit(code)
}

// body is what a session holds of one direction of an exchange's body.
type body struct {
	stored []byte // as stored: Body pieces, or the events' Pre+Data and the End's Tail
	read   []byte // as a client reads it: decoded from its Content-Encoding (nil when that fails)
}

// bodies reads every exchange's response body (dir ServerToClient) or
// request body.
func bodies(t testing.TB, f *formats.File, dir formats.Direction) map[int64]*body {
	t.Helper()
	out := map[int64]*body{}
	enc := map[int64]string{}
	for r, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		get := func(id int64) *body {
			if out[id] == nil {
				out[id] = &body{}
			}
			return out[id]
		}
		switch r := r.(type) {
		case *formats.Response:
			if dir == formats.ServerToClient && r.Events == 0 {
				enc[r.Exchange] = r.Encoding
			}
		case *formats.Request:
			if dir == formats.ClientToServer {
				for _, h := range r.Header {
					if strings.EqualFold(h.Name, "Content-Encoding") {
						enc[r.Exchange] = h.Value
					}
				}
			}
		case *formats.Body:
			if r.Dir == dir {
				b := get(r.Exchange)
				b.stored = append(b.stored, r.Data...)
			}
		case *formats.Frame:
			if dir == formats.ServerToClient {
				b := get(r.Exchange)
				b.stored = append(append(b.stored, r.Pre...), r.Data...)
			}
		case *formats.End:
			if r.Dir == dir {
				b := get(r.Exchange)
				b.stored = append(b.stored, r.Tail...)
			}
		}
	}
	for id, b := range out {
		b.read = b.stored
		switch strings.ToLower(enc[id]) {
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(bytes.NewReader(b.stored))
			if err == nil {
				b.read, err = io.ReadAll(zr)
			}
			if err != nil {
				b.read = nil
			}
		case "deflate":
			zr, err := zlib.NewReader(bytes.NewReader(b.stored))
			if err == nil {
				b.read, err = io.ReadAll(zr)
			}
			if err != nil {
				b.read = nil
			}
		}
	}
	return out
}

// exportFile runs an exporter into a file of t's temporary directory.
func exportFile(t testing.TB, name string, fn func(io.Writer) (Result, error)) (string, Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fn(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("export %s: %v", name, err)
	}
	return path, res
}
