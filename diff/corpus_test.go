package diff_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/diff/difftest"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestCorpusSame: every real capture recorded twice gives two sessions
// that are the same.
func TestCorpusSame(t *testing.T) {
	for _, sc := range []string{"basic-json", "gone-410", "multi-watch", "protobuf", "tls-h2"} {
		t.Run(sc, func(t *testing.T) {
			a := wttest.RecordCorpus(t, sc, false)
			b := wttest.RecordCorpus(t, sc, false)
			rep := difftest.Same(t, a, b, diff.Options{})
			if rep.Summary.Events.Compared == 0 || rep.Summary.Streams.Compared == 0 {
				t.Errorf("%s: summary %+v; want events and streams compared", sc, rep.Summary)
			}
			if sc == "tls-h2" && rep.Summary.Writes.Compared != 205 {
				t.Errorf("tls-h2: %d writes compared; want its 205", rep.Summary.Writes.Compared)
			}
		})
	}
}

// TestCorpusBasicVsGone: two different scenarios differ, and the report
// names what: the watch stream of one, the streams and LISTs of the
// other.
func TestCorpusBasicVsGone(t *testing.T) {
	a := wttest.RecordCorpus(t, "basic-json", false)
	b := wttest.RecordCorpus(t, "gone-410", false)
	rep, err := diff.Sessions(a, b, diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Same {
		t.Fatal("basic-json and gone-410 are the same")
	}
	s := rep.Summary
	if s.Streams.Missing != 1 || s.Streams.Extra != 4 || s.Exchanges.Missing != 1 || s.Exchanges.Extra != 2 {
		t.Errorf("summary %+v; want 1 stream missing, 4 extra, 1 LIST missing, 2 extra", s)
	}
	var text strings.Builder
	rep.WriteText(&text, diff.TextOptions{})
	for _, want := range []string{
		"watch configmaps -n corpus-basic\n  stream missing in " + b + ": 200 events",
		"watch podtemplates -n corpus-gone\n  stream extra in " + b + ": 12 events",
		"watch configmaps -n corpus-gone\n  stream extra in " + b + ": 81 events",
		"configmaps corpus-basic (collection)\n  exchange GET missing in " + b,
		"podtemplates corpus-gone (collection)\n  exchange GET extra in " + b,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, text.String())
		}
	}
}

// rewrite copies session src to a new session file, each record through
// mutate, then the extra records, then src's Summary.
func rewrite(t *testing.T, src string, mutate func(formats.Record), extra ...formats.Record) string {
	t.Helper()
	f, err := formats.Open(src, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := filepath.Join(t.TempDir(), "rewritten.wt")
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w, err := formats.NewWriter(out, formats.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sum formats.Record
	for r, err := range f.Records().All() {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*formats.Summary); ok {
			sum = r
			continue
		}
		mutate(r)
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range append(extra, sum) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestRealWrites: the 205 writes of a real recording (tls-h2: creates,
// updates and deletes of ConfigMaps and Secrets over HTTP/2) against
// copies with one change each: one update with another value is exactly
// that difference, as a diff of its body; one more create is exactly
// that, extra.
func TestRealWrites(t *testing.T) {
	a := wttest.RecordCorpus(t, "tls-h2", false)
	f, err := formats.Open(a, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var put, post int64 = -1, -1
	var last formats.Record
	for _, x := range f.Index().Exchanges {
		switch {
		case put < 0 && x.Request.Method == "PUT" && strings.HasSuffix(x.Request.Target, "/configmaps/cm-0005"):
			put = x.Request.Exchange
		case post < 0 && x.Request.Method == "POST" && strings.HasSuffix(x.Request.Target, "/configmaps"):
			post = x.Request.Exchange
		}
	}
	nextEx := int64(len(f.Index().Exchanges))
	var postReq formats.Request
	var postBody []byte
	for r, err := range f.ExchangeRecords(post).All() {
		if err != nil {
			t.Fatal(err)
		}
		switch r := r.(type) {
		case *formats.Request:
			postReq = *r
		case *formats.Body:
			if r.Dir == formats.ClientToServer {
				postBody = append(postBody, r.Data...)
			}
		}
		last = r
	}
	f.Close()
	if put < 0 || post < 0 || postBody == nil || last == nil {
		t.Fatalf("no PUT of cm-0005 (%d) or POST (%d) with a body in tls-h2", put, post)
	}

	b := rewrite(t, a, func(r formats.Record) {
		if body, ok := r.(*formats.Body); ok && body.Exchange == put && body.Dir == formats.ClientToServer {
			body.Data = bytes.Replace(body.Data, []byte(`"key0":"quebec"`), []byte(`"key0":"QUEBEC"`), 1)
		}
	})
	rep := mustDiff(t, a, b)
	ds := allDiffs(rep)
	if rep.Summary.Writes.Compared != 205 || len(ds) != 1 || ds[0].Kind != diff.KindChanged || ds[0].What != "PUT" ||
		rep.Groups[0].Subject != "configmaps corpus-tls/cm-0005" ||
		!strings.Contains(ds[0].Diff, "\n-    \"key0\": \"quebec\",\n+    \"key0\": \"QUEBEC\",\n") {
		t.Fatalf("one changed update: %s", text(rep))
	}

	// One more create: the first one's body under another name, on a
	// connection of its own.
	at := postReq.Time + int64(time.Second)
	body := bytes.Replace(postBody, []byte(`"name":"cm-`), []byte(`"name":"extra-cm-`), 1)
	b = rewrite(t, a, func(formats.Record) {},
		&formats.Conn{ID: 99, Time: at, Client: "127.0.0.1:1", Server: "127.0.0.1:6443", Proto: "http/1.1"},
		&formats.Request{Exchange: nextEx, Conn: 99, Time: at, Method: "POST", Target: postReq.Target, Proto: "HTTP/1.1", Header: postReq.Header},
		&formats.Body{Exchange: nextEx, Dir: formats.ClientToServer, Time: at, Data: body},
		&formats.End{Exchange: nextEx, Dir: formats.ClientToServer, Time: at, Size: int64(len(body))},
		&formats.Response{Exchange: nextEx, Time: at, Proto: "HTTP/1.1", Status: 201},
		&formats.End{Exchange: nextEx, Dir: formats.ServerToClient, Time: at})
	rep = mustDiff(t, a, b)
	ds = allDiffs(rep)
	if len(ds) != 2 || len(rep.Groups) != 1 || ds[0].Kind != diff.KindExtra || ds[0].Category != diff.CategoryState ||
		ds[1].Kind != diff.KindExtra || ds[1].What != "POST" || ds[1].B.Exchange != nextEx ||
		!strings.HasPrefix(rep.Groups[0].Subject, "configmaps corpus-tls/extra-cm-") {
		t.Fatalf("one more create: %s", text(rep))
	}
}

func mustDiff(t *testing.T, a, b string) *diff.Report {
	t.Helper()
	rep, err := diff.Sessions(a, b, diff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func allDiffs(r *diff.Report) []diff.Difference {
	var ds []diff.Difference
	for _, g := range r.Groups {
		ds = append(ds, g.Differences...)
	}
	return ds
}

func text(r *diff.Report) string {
	var b strings.Builder
	r.WriteText(&b, diff.TextOptions{})
	return b.String()
}
