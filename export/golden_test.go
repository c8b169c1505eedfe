package export

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/testkit/wttest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenSessions are session files written by an earlier version of
// wtrace (testdata/compat, never rewritten): stable inputs whose exports
// pin the schema. Between them they hold a proxy recording (redactions,
// a gzip'd body, labels), a pcap recording with ERROR events, one
// captured from its middle with lost bytes (anomalies), and TLS with
// HTTP/2.
var goldenSessions = []string{"proxy", "gone-410", "midstream-gap", "tls-h2"}

// goldenSuffix is the goldens' file suffix: the large ones are gzip'd.
func goldenSuffix(name string) string {
	if name == "tls-h2" {
		return ".gz"
	}
	return ""
}

func compatSession(t *testing.T, name string) string {
	t.Helper()
	root, err := wttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "compat", "9936756", name+".wt")
}

// golden compares got with testdata/name, or rewrites it with -update;
// a name ending in .gz is stored gzip'd.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	gz := strings.HasSuffix(name, ".gz")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data := got
		if gz {
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			zw.Write(got)
			zw.Close()
			data = b.Bytes()
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./export -run %s -update to create it)", err, t.Name())
	}
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(want))
		if err == nil {
			want, err = io.ReadAll(zr)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if !bytes.Equal(got, want) {
		line := 1 + bytes.Count(got[:commonPrefix(got, want)], []byte("\n"))
		t.Errorf("%s differs from the output from line %d on (go test ./export -update rewrites it after a deliberate change; the schema is stable: members are added, never renamed)", path, line)
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestSchemaGolden pins the Session document (wtrace inspect --json) and
// the JSONL export of the golden sessions.
func TestSchemaGolden(t *testing.T) {
	for _, name := range goldenSessions {
		t.Run(name, func(t *testing.T) {
			f := wttest.OpenSession(t, compatSession(t, name))
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(NewSession(f)); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("schema", name+".session.json"+goldenSuffix(name)), b.Bytes())

			b.Reset()
			if _, err := JSONL(&b, f, JSONLOptions{}); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("schema", name+".jsonl"+goldenSuffix(name)), b.Bytes())
		})
	}
}

// TestHARGolden pins the HAR export of a proxy recording.
func TestHARGolden(t *testing.T) {
	f := wttest.OpenSession(t, compatSession(t, "proxy"))
	var b bytes.Buffer
	if _, err := HAR(&b, f, HAROptions{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b.Bytes(), "", "  "); err != nil {
		t.Fatalf("the HAR is not JSON: %v", err)
	}
	golden(t, "har/proxy.har", pretty.Bytes())
}
