package replay

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wtrace/wtrace/frame"
)

// protoLog records the protocol and content type of every response a
// client got.
type protoLog struct {
	mu    sync.Mutex
	rt    http.RoundTripper
	proto map[string]int
	ct    map[string]int
}

func (p *protoLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.rt.RoundTrip(r)
	if err == nil {
		p.mu.Lock()
		p.proto[resp.Proto]++
		p.ct[resp.Header.Get("Content-Type")]++
		p.mu.Unlock()
	}
	return resp, err
}

// TestInformerProtobufOverTLSH2 is the end-to-end check of the TLS +
// HTTP/2 path: the tls-h2 capture (TLS 1.3, HTTP/2, decrypted with its key
// log) recorded, replayed over HTTPS, and a client-go informer configured
// for protobuf talking HTTP/2 to it sees the recorded protobuf watch.
func TestInformerProtobufOverTLSH2(t *testing.T) {
	path := corpusSession(t, "tls-h2")
	f := openSession(t, path)
	list := exchangeByTarget(t, f, "GET", "/api/v1/namespaces/corpus-tls/configmaps")
	watch := exchangeByTarget(t, f, "GET", "configmaps?resourceVersion=1064&timeout=25s")
	if got := frame.Format(f.Index().Exchanges[watch].Response.Events); got != frame.Protobuf {
		t.Fatalf("the recorded client-go watch is %v; want protobuf", got)
	}
	first, later := expectHandlers(listObjects(t, f, frame.JSON, list), sessionEvents(t, f, watch))
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("WatchList=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			srv, err := Open(path, Options{Writes: WritesReject})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			if err := srv.StartTLS(); err != nil {
				t.Fatal(err)
			}
			pl := &protoLog{proto: map[string]int{}, ct: map[string]int{}}
			cfg := &rest.Config{
				Host:            srv.URL,
				TLSClientConfig: rest.TLSClientConfig{CAData: srv.CertPEM(), ServerName: "localhost"},
				ContentConfig:   rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"},
				WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
					pl.rt = rt
					return pl
				},
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("corpus-tls"),
				informers.WithTweakListOptions(func(*metav1.ListOptions) {}))
			h := newHandlerLog()
			if _, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(h.handlers()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			factory.Start(ctx.Done())
			t.Cleanup(func() { cancel(); factory.Shutdown() })
			checkHandlers(t, h.waitFor(t, len(first)+len(later)), first, later)
			pl.mu.Lock()
			defer pl.mu.Unlock()
			if pl.proto["HTTP/2.0"] == 0 || pl.proto["HTTP/1.1"] > 0 {
				t.Errorf("responses by protocol %v; want HTTP/2 only", pl.proto)
			}
			// A streaming list is built from the recorded LIST, which this
			// session holds only as JSON: the replay serves the JSON watch
			// recorded from the same resourceVersion after it (client-go
			// accepts any type it can decode). Without WatchList the
			// recorded protobuf watch is served as recorded.
			if !watchList && pl.ct["application/vnd.kubernetes.protobuf;stream=watch"] == 0 {
				t.Errorf("responses by content type %v; want the protobuf watch", pl.ct)
			}
		})
	}
}
