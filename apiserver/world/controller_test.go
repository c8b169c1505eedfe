package world_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/testkit/ctrltest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// storeHandler serves every request from a Store alone — no recorded
// exchange, every recorded change of a watch due at once — which is
// enough for client-go to run against the store's world.
func storeHandler(t *testing.T, st *world.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, world.MaxBodyBytes+1))
		if err != nil {
			return
		}
		req := &world.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header, Body: body}
		if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
			serveWatch(w, r, st, req)
			return
		}
		resp, ok := st.Serve(req)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", resp.ContentType)
		w.WriteHeader(resp.Code)
		w.Write(resp.Body)
	})
}

func serveWatch(w http.ResponseWriter, r *http.Request, st *world.Store, req *world.Request) {
	wt, refused := st.Watch(req)
	if wt == nil {
		if refused == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", refused.ContentType)
		w.WriteHeader(refused.Code)
		w.Write(refused.Body)
		return
	}
	w.Header().Set("Content-Type", wt.ContentType())
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	for _, b := range wt.Initial() {
		w.Write(b)
	}
	fl.Flush()
	if wt.Expired() {
		return
	}
	timeout := time.Hour
	if n, err := strconv.Atoi(r.URL.Query().Get("timeoutSeconds")); err == nil && n > 0 {
		timeout = time.Duration(n) * time.Second
	}
	end := time.After(timeout)
	for {
		changed := st.Changed()
		for {
			ev, ok := wt.Next()
			if !ok {
				break
			}
			b, err := wt.Take(ev)
			if err != nil {
				return
			}
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		fl.Flush()
		select {
		case <-changed:
		case <-end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// TestControllerOnStore runs a real client-go controller (typed
// informers, a workqueue, GETs, writes of every verb) against a Store
// holding basic-json, in JSON and in protobuf: no call fails that an
// apiserver would have accepted, the objects it wrote are in the world,
// its informers see its own writes (the status it set), and a retry storm
// would show as a call count far above the reconciles.
func TestControllerOnStore(t *testing.T) {
	for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(ct, func(t *testing.T) {
			st, _ := load(t, "basic-json")
			srv := httptest.NewServer(storeHandler(t, st))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: ct}, QPS: 1000, Burst: 1000}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ctl, err := ctrltest.Start(ctx, cfg, ctrltest.Options{Namespace: "corpus-basic"})
			if err != nil {
				t.Fatal(err)
			}
			defer ctl.Stop()
			cs := kubernetes.NewForConfigOrDie(cfg)
			wttest.WaitFor(t, time.Minute, func() bool {
				l, err := cs.CoreV1().ConfigMaps("corpus-basic").List(ctx, metav1.ListOptions{})
				if err != nil {
					return false
				}
				parents, children := 0, map[string]bool{}
				for _, cm := range l.Items {
					if strings.HasSuffix(cm.Name, ctrltest.ChildSuffix) {
						if cm.Labels[ctrltest.AppliedLabel] == "yes" {
							children[strings.TrimSuffix(cm.Name, ctrltest.ChildSuffix)] = true
						}
						continue
					}
					parents++
				}
				for _, cm := range l.Items {
					if !strings.HasSuffix(cm.Name, ctrltest.ChildSuffix) && !children[cm.Name] {
						return false
					}
				}
				return parents > 0
			}, "every parent reconciled")
			wttest.WaitFor(t, time.Minute, func() bool {
				d := ctl.CachedDeployment("corpus-basic/" + ctl.DeploymentName())
				return d != nil && d.Status.Replicas == 1
			}, "its own status in its cache")
			wttest.WaitFor(t, time.Minute, func() bool {
				for _, k := range ctl.Keys() {
					if cm := ctl.Cached(k); cm != nil && !strings.HasSuffix(cm.Name, ctrltest.ChildSuffix) && cm.Annotations[ctrltest.SeenAnnotation] != "" {
						return true
					}
				}
				return false
			}, "its annotation in its cache")
			if f := ctl.Failures(); len(f) > 0 {
				t.Fatalf("failed calls: %v", f)
			}
			if w, r := ctl.Writes(), ctl.Reconciles(); w > 12*r+20 {
				t.Fatalf("%d writes for %d reconciles: a retry storm", w, r)
			}
			t.Logf("%d reconciles, calls %v", ctl.Reconciles(), ctl.Calls())
		})
	}
}

// TestInformersOnStore: a dynamic (JSON) informer and a metadata-only
// informer sync from a store holding a protobuf-only recording and see
// every recorded change; a typed protobuf informer does the same from a
// JSON-only one; a Table watch (kubectl get -w) gets rows.
func TestInformersOnStore(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, tc := range []struct{ scenario, ns string }{{"protobuf", "corpus-proto"}, {"basic-json", "corpus-basic"}} {
		t.Run(tc.scenario, func(t *testing.T) {
			st, f := load(t, tc.scenario)
			evs := watchEvents(t, f, "watch=true")
			final := map[string]bool{}
			for _, e := range evs {
				if e.typ == "DELETED" {
					delete(final, e.name)
				} else if e.typ != "BOOKMARK" {
					final[e.name] = true
				}
			}
			srv := httptest.NewServer(storeHandler(t, st))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000}
			dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, tc.ns, nil)
			di := dyn.ForResource(gvr).Informer()
			md := metadatainformer.NewFilteredSharedInformerFactory(metadata.NewForConfigOrDie(cfg), 0, tc.ns, nil)
			mi := md.ForResource(gvr).Informer()
			pcfg := *cfg
			pcfg.ContentType = "application/vnd.kubernetes.protobuf"
			typed := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(&pcfg), 0, informers.WithNamespace(tc.ns))
			ti := typed.Core().V1().ConfigMaps().Informer()
			dyn.Start(ctx.Done())
			md.Start(ctx.Done())
			typed.Start(ctx.Done())
			defer func() { cancel(); dyn.Shutdown(); md.Shutdown(); typed.Shutdown() }()
			for name, inf := range map[string]cache.SharedIndexInformer{"dynamic": di, "metadata": mi, "typed protobuf": ti} {
				if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
					t.Fatalf("%s informer did not sync", name)
				}
				wttest.WaitFor(t, time.Minute, func() bool {
					keys := inf.GetStore().ListKeys()
					if len(keys) != len(final) {
						return false
					}
					for _, k := range keys {
						if !final[strings.TrimPrefix(k, tc.ns+"/")] {
							return false
						}
					}
					return true
				}, "%s informer at the recording's end", name)
			}
			// kubectl get -w: a Table watch from the start.
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/namespaces/"+tc.ns+"/configmaps?watch=1&resourceVersion=0&timeoutSeconds=1", nil)
			req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != len(final) || !strings.Contains(lines[0], `"kind":"Table"`) || !strings.Contains(lines[0], `"columnDefinitions":[`) {
				t.Fatalf("Table watch: %d events for %d objects; first %.200s", len(lines), len(final), lines[0])
			}
		})
	}
}
