package replay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
)

// TestReplayExample is the example of the package documentation: a
// regression test that runs a real client-go informer against a recorded
// session, as fast as it can read.
func TestReplayExample(t *testing.T) {
	path := replay.CorpusSession(t, "basic-json") // in your repository: "testdata/incident-42.wt"

	srv := replaytest.NewServer(t, path, replay.Options{Speed: 0})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("corpus-basic"))

	var seen atomic.Int64 // your controller goes here
	factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen.Add(1) },
		UpdateFunc: func(old, obj any) { seen.Add(1) },
		DeleteFunc: func(obj any) { seen.Add(1) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	// The session ends with 19 ConfigMaps, the last changed at
	// resourceVersion 407: the informer has seen it all when its cache
	// holds that. (How many notifications that took depends on where the
	// world's timeline, which starts at the first request and here runs
	// as fast as it can, was when the informer's list began: 205 from the
	// session's start, fewer from later in it.)
	lister := factory.Core().V1().ConfigMaps().Lister().ConfigMaps("corpus-basic")
	atEnd := func() (bool, int) {
		cms, err := lister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		last := false
		for _, cm := range cms {
			last = last || cm.ResourceVersion == "407"
		}
		return last && len(cms) == 19, len(cms)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		done, n := atEnd()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute the informer holds %d ConfigMaps (%d notifications); want the session's end: 19, the last at resourceVersion 407", n, seen.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := seen.Load(); n < 19 || n > 205 {
		t.Errorf("%d notifications; want from 19 (the end state at once) to 205 (the whole session)", n)
	}
	cm, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d notifications; %d ConfigMaps at the end of the session", seen.Load(), len(cm))
}
