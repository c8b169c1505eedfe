package replay

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// streamingListSession is a session recorded from a client whose first
// view of ConfigMaps is a streaming list (client-go ≥ 0.35's WatchList, as
// kube-state-metrics runs it): n ConfigMaps of namespace ks as ADDED
// events 100 ms apart (the first 101 ms after the request: past the
// initial burst a watch from "" is read with), the initial-events-end
// bookmark and a change of cm-0 (rv 790); a second later, the watch that
// resumes after it, with a change of cm-1 (rv 800). It returns the session
// and each ConfigMap's recorded resourceVersion before the changes.
// Without resumed, the session ends with the first watch.
func streamingListSession(t *testing.T, n int, resumed bool) (string, map[string]string) {
	t.Helper()
	cm := func(typ string, i, rv int, v string) []byte {
		return fmt.Appendf(nil, `{"type":%q,"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"ks",`+
			`"uid":"00000000-0000-4000-8000-%012d","resourceVersion":"%d","creationTimestamp":"2026-11-21T12:00:00Z"},"data":{"v":%q}}}`,
			typ, i, i, rv, v)
	}
	want := map[string]string{}
	var initial [][]byte
	for i := range n {
		initial = append(initial, cm("ADDED", i, 20+i, "0"))
		want[fmt.Sprintf("ks/cm-%d", i)] = fmt.Sprint(20 + i)
	}
	last := fmt.Sprint(20 + n - 1)
	end, err := codec.EndBookmark(frame.JSON, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, last)
	if err != nil {
		t.Fatal(err)
	}
	initial = append(initial, end, cm("MODIFIED", 0, 790, "1"))
	const coll = "/api/v1/namespaces/ks/configmaps"
	exs := []synthExchange{{target: coll + "?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=1&watch=true",
		header: jsonHeader(), events: frame.JSON, frames: initial, chunked: true}}
	if resumed {
		exs = append(exs, synthExchange{target: coll + "?allowWatchBookmarks=true&resourceVersion=790&timeoutSeconds=300&watch=true",
			header: jsonHeader(), events: frame.JSON, frames: [][]byte{cm("MODIFIED", 1, 800, "1")}, chunked: true})
	}
	return writeSession(t, exs...), want
}

// TestStreamingListAfterTheObjectsExist: a client-go informer with
// WatchList on, started against a world replay of a session whose first
// view of its resource was a streaming list, is synced only once its cache
// holds every object that existed, each with its recorded
// resourceVersion: the initial-events-end bookmark comes after their
// ADDED events, not before (and they do not come later as changes with
// new resourceVersions).
func TestStreamingListAfterTheObjectsExist(t *testing.T) {
	for _, pace := range []struct {
		name    string
		opts    Options
		resumed bool
	}{
		{"speed 0", Options{Speed: 0}, true},
		{"speed 1", Options{Speed: 1}, true},
		{"quiet", Options{Pace: PaceQuiet}, true},
		{"one watch", Options{Speed: 0}, false},
	} {
		t.Run(pace.name, func(t *testing.T) {
			path, want := streamingListSession(t, 5, pace.resumed)
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
			srv := newTestServer(t, path, pace.opts)
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("ks"))
			inf := f.Core().V1().ConfigMaps().Informer()
			adds := newHandlerLog()
			reg, err := inf.AddEventHandler(k8scache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) { adds.add("add", obj) },
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			go inf.Run(ctx.Done())
			if !k8scache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
				t.Fatal("the informer never synced")
			}
			// At sync: every object, with its recorded resourceVersion
			// (cm-0 and cm-1 may have been changed since: 790, 800).
			got := map[string]string{}
			for _, o := range inf.GetStore().List() {
				c := o.(*corev1.ConfigMap)
				got[c.Namespace+"/"+c.Name] = c.ResourceVersion
			}
			for k, rv := range map[string]string{"ks/cm-0": "790", "ks/cm-1": "800"} {
				if got[k] == rv {
					got[k] = want[k]
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the cache at sync holds %v, want %v", got, want)
			}
			// What the handler was told before the sync: an add of each
			// at its recorded resourceVersion, nothing else.
			adds.mu.Lock()
			var first []string
			for _, e := range adds.evs {
				first = append(first, "ks/"+e.name+"@"+e.rv)
			}
			adds.mu.Unlock()
			sort.Strings(first)
			var exp []string
			for k, rv := range want {
				exp = append(exp, k+"@"+rv)
			}
			sort.Strings(exp)
			if len(first) < len(exp) || strings.Join(first[:len(exp)], " ") != strings.Join(exp, " ") {
				t.Errorf("the handler's adds at sync: %v, want %v", first, exp)
			}
		})
	}
}
