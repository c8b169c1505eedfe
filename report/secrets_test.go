package report_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"regexp"
	"testing"

	"github.com/wtrace/wtrace/report"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// chunks are the decoded contents of a page's store: what a click shows.
func chunks(t *testing.T, page []byte) [][]byte {
	t.Helper()
	var out [][]byte
	re := regexp.MustCompile(`<script type="application/octet-stream" id="c\d+">([^<]*)</script>`)
	for _, m := range re.FindAllSubmatch(page, -1) {
		z, err := base64.StdEncoding.DecodeString(string(m[1]))
		if err != nil {
			t.Fatalf("a chunk is not base64: %v", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			t.Fatalf("a chunk is not gzip: %v", err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("a chunk does not gunzip: %v", err)
		}
		out = append(out, b)
	}
	return out
}

// TestNoSecrets: the report of a session shows what the session holds,
// redacted as it is there: no Secret value and no credential of the
// corpus (its Secrets, its bearer token) is in the page or in any chunk a
// click decodes, with the default budget and with every byte embedded.
func TestNoSecrets(t *testing.T) {
	needles, err := wttest.CorpusNeedles()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []string{"multi-watch", "tls-h2"} {
		path := wttest.RecordCorpus(t, sc, false)
		for _, opts := range []report.Options{{}, {MaxBodyBytes: 1 << 40, MaxBodySize: 1 << 30}} {
			var page bytes.Buffer
			if err := report.Session(&page, wttest.OpenSession(t, path), sc, opts); err != nil {
				t.Fatal(err)
			}
			parts := append(chunks(t, page.Bytes()), page.Bytes())
			if len(parts) < 2 {
				t.Fatalf("%s: the page has no chunk", sc)
			}
			if n := found(parts, needles); n != "" {
				t.Errorf("%s: the report holds %s", sc, n)
			}
		}
	}
	// The grep sees what a click shows: a session recorded with
	// --keep-secrets has its Secret values in the chunks.
	kept := wttest.RecordCorpus(t, "multi-watch", true)
	var page bytes.Buffer
	if err := report.Session(&page, wttest.OpenSession(t, kept), "kept", report.Options{}); err != nil {
		t.Fatal(err)
	}
	if found(chunks(t, page.Bytes()), needles) == "" {
		t.Errorf("the report of a session that kept its Secret values shows none of them: the grep sees nothing")
	}
}

// found names the first needle in parts ("" if none).
func found(parts [][]byte, needles []wttest.Needle) string {
	for _, p := range parts {
		for _, n := range needles {
			if len(n.Value) > 0 && bytes.Contains(p, n.Value) {
				return n.From
			}
		}
	}
	return ""
}
