package replay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

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
				srv := newTestServer(t, path, Options{Logger: slog.New(hl)})
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
