package edit_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/edit"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// recordCorpus records the corpus capture of scenario into dir.
func recordCorpus(t *testing.T, scenario, dir string) string {
	t.Helper()
	root, err := wttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var pcap string
	for _, d := range []string{filepath.Join(root, "..", "shared", "corpus"), filepath.Join(root, "testdata", "corpus")} {
		if p := filepath.Join(d, scenario, "capture.pcap"); fileExists(p) {
			pcap = p
			break
		}
	}
	if pcap == "" {
		t.Skipf("no corpus capture %s", scenario)
	}
	out := filepath.Join(dir, scenario+".wt")
	if _, err := wttest.RecordPcap(pcap, out, capture.Options{}); err != nil {
		t.Fatal(err)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// scope is what one watch of a session watches.
type scope struct {
	target         world.Target
	label, field   string
	first, last    int64 // the span of its watches
	streamingLists bool
}

func (s scope) String() string {
	return fmt.Sprintf("%s ns=%q label=%q field=%q", s.target.Resource, s.target.Namespace, s.label, s.field)
}

// watchScopes lists the scopes of the recorded watches of f.
func watchScopes(f *formats.File) []scope {
	byKey := map[string]*scope{}
	for _, x := range f.Index().Exchanges {
		if x.Request.Missing || x.Response == nil || x.Response.Status != 200 || x.Response.Events == frame.Unknown {
			continue
		}
		u, err := url.ParseRequestURI(x.Request.Target)
		if err != nil {
			continue
		}
		t, ok := world.ParsePath(u.Path)
		if !ok {
			continue
		}
		t.Watch = false
		q := u.Query()
		sc := scope{target: t, label: q.Get("labelSelector"), field: q.Get("fieldSelector")}
		k := sc.String()
		if byKey[k] == nil {
			sc.first = x.Request.Time
			byKey[k] = &sc
		}
		byKey[k].last = max(byKey[k].last, x.Last)
		if q.Get("sendInitialEvents") == "true" {
			byKey[k].streamingLists = true
		}
	}
	var out []scope
	for _, s := range byKey {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// dynamicStore is the store of a dynamic informer of sc after a replay of
// f as fast as it reads: "namespace/name" → resourceVersion.
func dynamicStore(t *testing.T, f *formats.File, sc scope) store {
	t.Helper()
	srv, err := replay.New(f, replay.Options{Speed: 0, Writes: replay.WritesReject})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dc, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, sc.target.Namespace, func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = sc.label, sc.field
	})
	inf := factory.ForResource(sc.target.Resource).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	get := func() store {
		s := store{}
		for _, o := range inf.GetStore().List() {
			u := o.(*unstructured.Unstructured)
			s[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
		}
		return s
	}
	return settle(t, inf, get)
}

func settle(t *testing.T, inf k8scache.SharedIndexInformer, get func() store) store {
	t.Helper()
	wttest.WaitFor(t, time.Minute, inf.HasSynced, "the informer to sync")
	last, since := get().String(), time.Now()
	wttest.WaitFor(t, time.Minute, func() bool {
		if s := get().String(); s != last {
			last, since = s, time.Now()
		}
		return time.Since(since) > time.Second
	}, "the informer's store to settle")
	return get()
}

// TestSliceCorpus: each corpus session (JSON and protobuf, streaming
// lists, paginated LISTs, label selectors, HTTP/2, a 410 and its relist),
// sliced from the middle of each watched scope's span to the end,
// replayed to a dynamic informer of that scope: the informer ends with
// the store it ends with after a replay of the whole session; the slice
// holds the session's events after the cut, byte for byte, and no
// secret; a replay --from the cut (Seek) ends with the slice's store.
func TestSliceCorpus(t *testing.T) {
	dir := t.TempDir()
	for _, scenario := range []string{"basic-json", "multi-watch", "protobuf", "tls-h2", "gone-410"} {
		t.Run(scenario, func(t *testing.T) {
			session := recordCorpus(t, scenario, dir)
			whole := wttest.OpenSession(t, session)
			scopes := watchScopes(whole)
			if len(scopes) == 0 {
				t.Fatal("no watches")
			}
			for _, sc := range scopes {
				t.Run(sc.String(), func(t *testing.T) {
					want := dynamicStore(t, whole, sc)
					from := sc.first + (sc.last-sc.first)/2
					out := filepath.Join(t.TempDir(), "slice.wt")
					res, err := edit.Slice(context.Background(), session, edit.SliceOptions{From: from, Output: formats.FileSinkOptions{Path: out}})
					if err != nil {
						t.Fatal(err)
					}
					if res.Cut == 0 || len(res.Notes) > 0 {
						t.Fatalf("slice from %s: %+v; want a watch cut", time.Unix(0, from).UTC(), res)
					}
					wttest.CheckNoSecrets(t, out)
					got := dynamicStore(t, wttest.OpenSession(t, out), sc)
					if got.String() != want.String() {
						t.Errorf("the slice from %s replayed:\n%s\nthe whole session replayed:\n%s", time.Unix(0, from).UTC(), got, want)
					}
					sk, err := edit.Seek(context.Background(), session, t.TempDir(), edit.SliceOptions{From: from})
					if err != nil {
						t.Fatal(err)
					}
					defer sk.Close()
					if seek := dynamicStore(t, sk.File, sc); seek.String() != got.String() {
						t.Errorf("replay --from %s:\n%s\nthe slice replayed:\n%s", time.Unix(0, from).UTC(), seek, got)
					}
					wantEvents, gotEvents := eventsAfter(t, whole, from), eventsAfter(t, wttest.OpenSession(t, out), from)
					for k, evs := range wantEvents {
						if strings.Join(evs, ",") != strings.Join(gotEvents[k], ",") {
							t.Errorf("the events after the cut of %s: %d in the slice, %d in the session, or not the same", k, len(gotEvents[k]), len(evs))
						}
					}
				})
			}
		})
	}
}

// eventsAfter lists, per watched scope, the sha256 of the events after
// capture time from (a slice's synthesized initial events are at its
// start, from).
func eventsAfter(t *testing.T, f *formats.File, from int64) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for ev, err := range f.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Time <= from {
			continue
		}
		_, target, _ := strings.Cut(ev.Request, " ")
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		k := u.Path + "?" + q.Get("labelSelector") + "&" + q.Get("fieldSelector") + "&" + q.Get("sendInitialEvents")
		out[k] = append(out[k], fmt.Sprintf("%x", sha256.Sum256(ev.Data)))
	}
	return out
}

// TestSliceFilters: --resource keeps that resource's exchanges (and
// discovery), --exchange those exchanges; the Meta says where the slice
// came from; a window that ends before it starts is refused.
func TestSliceFilters(t *testing.T) {
	dir := t.TempDir()
	session := recordCorpus(t, "multi-watch", dir)
	whole := wttest.OpenSession(t, session)
	var secrets []int64
	for _, x := range whole.Index().Exchanges {
		if strings.Contains(x.Request.Target, "/secrets") {
			secrets = append(secrets, x.Request.Exchange)
		}
	}
	if len(secrets) < 2 {
		t.Fatalf("multi-watch has %d exchanges of secrets", len(secrets))
	}
	for _, c := range []struct {
		name string
		opts edit.SliceOptions
		want []string // targets of the slice, sorted
	}{
		{"resource", edit.SliceOptions{Resources: []string{"secrets"}}, targetsOf(whole, secrets...)},
		{"exchange", edit.SliceOptions{Exchanges: secrets[1:2]}, targetsOf(whole, secrets[1])},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "slice.wt")
			c.opts.Output = formats.FileSinkOptions{Path: out}
			c.opts.Tool = "wtrace test"
			if _, err := edit.Slice(context.Background(), session, c.opts); err != nil {
				t.Fatal(err)
			}
			f := wttest.OpenSession(t, out)
			var ids []int64
			for _, x := range f.Index().Exchanges {
				ids = append(ids, x.Request.Exchange)
			}
			if got := targetsOf(f, ids...); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("the slice holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			m := f.Index().Meta
			if m.Labels["sliced-from"] != filepath.Base(session) || m.Labels["sliced-by"] != "wtrace test" ||
				(c.name == "resource" && m.Labels["slice-resources"] != "secrets") ||
				(c.name == "exchange" && m.Labels["slice-exchanges"] != fmt.Sprint(secrets[1])) {
				t.Errorf("labels %v", m.Labels)
			}
		})
	}
	if _, err := edit.Slice(context.Background(), session, edit.SliceOptions{From: 2, To: 1,
		Output: formats.FileSinkOptions{Path: filepath.Join(dir, "x.wt")}}); err == nil {
		t.Error("a window that ends before it starts: no error")
	}
}

// targetsOf lists the request targets of exchanges ids of f, sorted.
func targetsOf(f *formats.File, ids ...int64) []string {
	var out []string
	for _, id := range ids {
		out = append(out, f.Exchange(id).Request.Target)
	}
	slices.Sort(out)
	return out
}

// TestSeekWriter: Seek writes its slice in the Writer options it is
// given, and without any in large blocks (a replay reads it whole): the
// same records either way.
func TestSeekWriter(t *testing.T) {
	session := recordCorpus(t, "multi-watch", t.TempDir())
	whole := wttest.OpenSession(t, session)
	start, end := edit.Start(whole.Index()), whole.Index().Blocks[len(whole.Index().Blocks)-1].Last
	from := start + (end-start)/4
	seek := func(w formats.WriterOptions) (blocks int, recs []string) {
		t.Helper()
		sk, err := edit.Seek(context.Background(), session, t.TempDir(), edit.SliceOptions{From: from, Output: formats.FileSinkOptions{Writer: w}})
		if err != nil {
			t.Fatal(err)
		}
		defer sk.Close()
		for r, err := range sk.File.Records().All() {
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := r.(*formats.Meta); !ok {
				recs = append(recs, fmt.Sprintf("%#v", r))
			}
		}
		return len(sk.File.Index().Blocks), recs
	}
	large, want := seek(formats.WriterOptions{})
	small, got := seek(formats.WriterOptions{BlockSize: 16 << 10})
	if large != 1 || small < 4 {
		t.Errorf("slice in %d blocks by default, %d of 16 KiB; want 1 (4 MiB blocks) and several", large, small)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the slices' records differ with the block size (%d and %d records)", len(got), len(want))
	}
}
