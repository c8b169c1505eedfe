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

	// The session holds a LIST of 5 ConfigMaps and a WATCH of 200 events.
	deadline := time.Now().Add(time.Minute)
	for seen.Load() < 205 {
		if time.Now().After(deadline) {
			t.Fatalf("%d notifications after a minute; want 205", seen.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cm, err := factory.Core().V1().ConfigMaps().Lister().ConfigMaps("corpus-basic").List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d notifications; %d ConfigMaps at the end of the session", seen.Load(), len(cm))
}
