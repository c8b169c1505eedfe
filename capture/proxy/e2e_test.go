package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// recordCorpus records ../../testdata/corpus/<scenario> into a session
// file with Secret values kept (the replayed "apiserver" must send them,
// so the proxy's recording has something to redact).
func recordCorpus(t *testing.T, scenario string) string {
	t.Helper()
	return wttest.RecordCorpus(t, scenario, true)
}

// event is a watch event as compared between sessions.
type event struct {
	typ, kind, name, rv string
	size                int
	sha                 [32]byte
	redacted            bool
}

func (e event) String() string {
	return fmt.Sprintf("%s %s %s@%s (%d bytes, %x)", e.typ, e.kind, e.name, e.rv, e.size, e.sha[:4])
}

// watchEvents returns the events of the exchanges whose target contains
// sub (and asks for a watch), in session order.
func watchEvents(t *testing.T, path, sub string) []event {
	t.Helper()
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []int64
	format := map[int64]frame.Format{}
	for _, x := range f.Index().Exchanges {
		if x.Response != nil && x.Response.Events != frame.Unknown && strings.Contains(x.Request.Target, sub) {
			ids = append(ids, x.Request.Exchange)
			format[x.Request.Exchange] = x.Response.Events
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var evs []event
	for r, err := range f.ExchangeRecords(ids...).All() {
		if err != nil {
			t.Fatal(err)
		}
		fr, ok := r.(*formats.Frame)
		if !ok {
			continue
		}
		m, err := frame.Peek(format[fr.Exchange], fr.Data)
		if err != nil {
			t.Fatalf("%s: Peek(event %d of exchange %d): %v", path, fr.Seq, fr.Exchange, err)
		}
		evs = append(evs, event{m.Type, m.Kind, m.Name, m.ResourceVersion, len(fr.Data), sha256.Sum256(fr.Data), len(fr.Redacted) > 0})
	}
	return evs
}

// TestInformerThroughProxy is the end-to-end test of --proxy: a corpus
// session served by replay over HTTPS + HTTP/2 plays the apiserver; the
// proxy, configured by a kubeconfig pointing at it, records; a client-go
// informer talks to the proxy. The proxy's session must hold the same
// watch events as the original (type, resourceVersion, bytes; Secrets
// redacted, same length) and no secret.
func TestInformerThroughProxy(t *testing.T) {
	for _, tc := range []struct {
		scenario, resource, namespace string
		origWatch                     string // the recorded watch the informer's is served from
	}{
		{"basic-json", "configmaps", "corpus-basic", "configmaps?watch=true"},
		{"multi-watch", "secrets", "corpus-multi", "secrets?watch=true&resourceVersion="},
	} {
		t.Run(tc.scenario+"/"+tc.resource, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
			orig := recordCorpus(t, tc.scenario)
			want := watchEvents(t, orig, tc.origWatch)
			if len(want) == 0 {
				t.Fatalf("no %s watch in %s", tc.resource, tc.scenario)
			}
			srv, err := replay.Open(orig, replay.Options{Writes: replay.WritesReject})
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.StartTLS(); err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kc, srv.Kubeconfig(), 0o600); err != nil {
				t.Fatal(err)
			}
			r := startRecording(t, kc, false, 100*time.Millisecond)

			cs, err := kubernetes.NewForConfig(&rest.Config{Host: r.proxy.URL, BearerToken: clientToken})
			if err != nil {
				t.Fatal(err)
			}
			factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(tc.namespace),
				informers.WithTweakListOptions(func(*metav1.ListOptions) {}))
			var inf k8scache.SharedIndexInformer
			if tc.resource == "secrets" {
				inf = factory.Core().V1().Secrets().Informer()
			} else {
				inf = factory.Core().V1().ConfigMaps().Informer()
			}
			seen := make(chan struct{}, 1)
			note := func(any) {
				select {
				case seen <- struct{}{}:
				default:
				}
			}
			inf.AddEventHandler(k8scache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }, DeleteFunc: note})
			ctx, cancel := context.WithCancel(context.Background())
			factory.Start(ctx.Done())
			deadline := time.After(60 * time.Second)
			for r.tee.Stats().Events < int64(len(want)) {
				select {
				case <-seen:
				case <-time.After(10 * time.Millisecond):
				case <-deadline:
					t.Fatalf("the proxy recorded %d events within a minute; want %d", r.tee.Stats().Events, len(want))
				}
			}
			cancel()
			factory.Shutdown()
			r.stop(t)

			got := watchEvents(t, r.path, tc.resource+"?")
			if len(got) != len(want) {
				t.Fatalf("proxy session: %d events; original: %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if w.kind == "Secret" && w.typ != "BOOKMARK" {
					if !g.redacted || g.size != w.size || g.typ != w.typ || g.name != w.name || g.rv != w.rv {
						t.Errorf("event %d = %v (redacted %v); want a redacted copy of %v", i, g, g.redacted, w)
					}
					continue
				}
				if g != w {
					t.Errorf("event %d = %v; want %v", i, g, w)
				}
			}
			v := readSession(t, r.path)
			var lists int
			for id, req := range v.requests {
				if !strings.Contains(req.Target, "watch=") {
					lists++
				}
				for _, h := range req.Header {
					if h.Name == "Authorization" && !h.Redacted {
						t.Errorf("exchange %d: Authorization stored", id)
					}
				}
			}
			if lists == 0 {
				t.Error("no LIST recorded")
			}
			wttest.CheckNoSecrets(t, r.path, clientToken)
			if tc.resource == "secrets" {
				checkRedactedDecode(t, r.path, tc.namespace)
			}
		})
	}
}

// checkRedactedDecode replays a session whose Secrets were redacted to a
// client-go informer: the redacted objects still decode, and hold none of
// the original values.
func checkRedactedDecode(t *testing.T, path, namespace string) {
	t.Helper()
	srv := replaytest.NewServer(t, path, replay.Options{Writes: replay.WritesReject})
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Secrets().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !k8scache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync from the redacted session")
	}
	needles, err := wttest.CorpusNeedles()
	if err != nil {
		t.Fatal(err)
	}
	objs := inf.GetStore().List()
	values := 0
	for _, o := range objs {
		s := o.(*corev1.Secret)
		for k, v := range s.Data {
			values++
			for _, n := range needles {
				if len(n.Value) > 0 && bytes.Contains(v, n.Value) {
					t.Errorf("secret %s data.%s decoded from the redacted session holds %s", s.Name, k, n.From)
				}
			}
		}
	}
	if len(objs) == 0 || values == 0 {
		t.Errorf("the informer decoded %d secrets with %d values from the redacted session; want some", len(objs), values)
	}
}
