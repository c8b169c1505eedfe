package replay

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// exactTarget returns the exchange whose request is method target.
func exactTarget(t *testing.T, f *formats.File, method, target string) int64 {
	t.Helper()
	for _, x := range f.Index().Exchanges {
		if x.Request.Method == method && x.Request.Target == target {
			return x.Request.Exchange
		}
	}
	t.Fatalf("no exchange %s %s", method, target)
	return -1
}

// listRV returns the resourceVersion of a recorded LIST body.
func listRV(t *testing.T, f *formats.File, id int64) string {
	t.Helper()
	l, err := frame.ListItems(frame.CBOR, sessionBody(t, f, id))
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}

// newerThan returns the events whose resourceVersion is above rv.
func newerThan(evs []recordedEvent, rv string) []recordedEvent {
	n, _ := strconv.ParseInt(rv, 10, 64)
	var out []recordedEvent
	for _, e := range evs {
		if v, _ := strconv.ParseInt(e.meta.ResourceVersion, 10, 64); v > n {
			out = append(out, e)
		}
	}
	return out
}

// startDynamicInformer runs a dynamic informer of core/v1 resource
// against url until the test ends (with the CBOR gates the caller set,
// client-go's dynamic client asks for CBOR).
func startDynamicInformer(t *testing.T, url, resource, namespace string) *handlerLog {
	t.Helper()
	dc, err := dynamic.NewForConfig(&rest.Config{Host: url})
	if err != nil {
		t.Fatal(err)
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, namespace, nil)
	inf := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: resource}).Informer()
	h := newHandlerLog()
	if _, err := inf.AddEventHandler(k8scache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.add("add", obj.(*unstructured.Unstructured)) },
		UpdateFunc: func(_, obj any) { h.add("update", obj.(*unstructured.Unstructured)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(k8scache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			h.add("delete", obj.(*unstructured.Unstructured))
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
	})
	return h
}

// TestInformerCBOR: the cbor-informer session (client-go informers that
// preferred CBOR, from a real apiserver with CBORServingAndStorage):
// dynamic informers get the recorded CBOR streaming lists (WatchList on),
// or the recorded CBOR LIST (taken at the end of the session) and a watch
// from its resourceVersion that resumes in the recorded stream (WatchList
// off), and see every event: as recorded when they prefer CBOR,
// transcoded to JSON when they do not.
func TestInformerCBOR(t *testing.T) {
	path := corpusSession(t, "cbor-informer")
	f := openSession(t, path)
	for _, resource := range []string{"configmaps", "secrets"} {
		stream := exchangeByTarget(t, f, "GET", "/"+resource+"?allowWatchBookmarks=true")
		list := exactTarget(t, f, "GET", "/api/v1/namespaces/wtrace-cbor-informer/"+resource)
		evs := sessionEvents(t, f, stream)
		initial, live := initialEvents(evs)
		for _, c := range []struct{ watchList, cbor bool }{{true, true}, {false, true}, {true, false}, {false, false}} {
			watchList := c.watchList
			first, rest := expectHandlers(initial, live)
			if !watchList {
				l := listObjects(t, f, frame.CBOR, list)
				first, rest = expectHandlers(l, newerThan(live, listRV(t, f, list)))
			}
			t.Run(fmt.Sprintf("%s/WatchList=%v/CBOR=%v", resource, watchList, c.cbor), func(t *testing.T) {
				clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.ClientsAllowCBOR, c.cbor)
				clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.ClientsPreferCBOR, c.cbor)
				clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
				hl := &howLog{ch: make(chan struct{}, 1)}
				srv := newTestServer(t, path, Options{Writes: WritesReject, Logger: slog.New(hl)})
				h := startDynamicInformer(t, srv.URL, resource, "wtrace-cbor-informer")
				got := h.waitFor(t, len(first)+len(rest))
				// The recorded streams were cut by the end of the capture:
				// they stay open after their last event.
				hl.waitHow(t, howRecorded, "/"+resource)
				checkHandlers(t, h.waitFor(t, len(got)), first, rest)
				t.Logf("requests: %q", hl.all())
			})
		}
	}
}

// TestWritesCBOR: client-go preferring CBOR writes in CBOR (create,
// update, get, delete of a Secret, as the cbor-informer session's client
// did against the real apiserver): the replay reads its CBOR bodies and
// DeleteOptions, so no write gets 415 and every write lands in the world.
func TestWritesCBOR(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.ClientsAllowCBOR, true)
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.ClientsPreferCBOR, true)
	srv := newTestServer(t, corpusSession(t, "cbor-informer"), Options{})
	dc, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secrets := dc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace("wtrace-cbor-informer")
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "written-in-cbor"}, "stringData": map[string]any{"k": "v1"}}}
	created, err := secrets.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	created.Object["stringData"] = map[string]any{"k": "v2"}
	if _, err := secrets.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	got, err := secrets.Get(ctx, "written-in-cbor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d, _, _ := unstructured.NestedString(got.Object, "data", "k"); d != base64.StdEncoding.EncodeToString([]byte("v2")) {
		t.Errorf("data.k = %q after the update; want v2 encoded", d)
	}
	grace := int64(0)
	if err := secrets.Delete(ctx, "written-in-cbor", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := secrets.Get(ctx, "written-in-cbor", metav1.GetOptions{}); err == nil {
		t.Error("the Secret is still there after its delete")
	}
	cbor := 0
	for _, r := range srv.Requests() {
		if r.Status == http.StatusUnsupportedMediaType {
			t.Errorf("%s %s: 415", r.Method, r.Target)
		}
		if r.IsWrite() && strings.HasPrefix(r.Header.Get("Content-Type"), "application/cbor") {
			cbor++
		}
	}
	if cbor != 3 {
		t.Errorf("%d writes in CBOR; want the create, the update and the delete", cbor)
	}
}
