package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
)

// soakDuration is how long long-soak's workload runs (-duration).
var soakDuration = 32 * time.Minute

// longSoak: half an hour (-duration) of watch traffic through kubectl
// proxy, the kind a recording of a real cluster holds, to measure session
// sizes on (docs/BENCHMARKS.md): client-go informers of configmaps and
// secrets (dynamic, JSON; metadata-only, protobuf), a reflector-like JSON
// watch of configmaps across namespaces by label (re-watched from its
// last resourceVersion on each timeout, bookmarks on), and a protobuf
// watch of secrets restarted without a resourceVersion on each timeout
// (every object again, as kubectl get -w restarted). The workload keeps
// pools of configmaps and secrets in two namespaces and creates, updates
// and deletes them, about 15 a second in bursts and pauses.
func longSoak(ctx context.Context, e *env) error {
	hc := e.c.client(nil)
	nsB := e.ns + "-b"
	for _, ns := range []string{e.ns, nsB} {
		if err := (&env{c: e.c, ns: ns}).namespace(ctx, hc); err != nil {
			return err
		}
	}
	w := newSoakWorkload(e, hc, []string{e.ns, nsB}, 41)
	if err := w.fill(ctx); err != nil {
		return err
	}
	port, stopProxy, err := e.kubectlProxy()
	if err != nil {
		return err
	}
	defer stopProxy()
	proxy := fmt.Sprintf("http://127.0.0.1:%d", port)
	r := &recorder{}
	cmdline, err := e.capture(port, func() error {
		stop := make(chan struct{})
		cfg := func(client string) *rest.Config {
			c := &rest.Config{Host: proxy, QPS: 100, Burst: 200}
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return r.wrap(client, rt) })
			return c
		}
		dc, err := dynamic.NewForConfig(cfg("dynamic-json"))
		if err != nil {
			return err
		}
		df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, e.ns, nil)
		df.ForResource(configmaps).Informer()
		df.ForResource(secrets).Informer()
		df.Start(stop)
		mc, err := metadata.NewForConfig(cfg("metadata-protobuf"))
		if err != nil {
			return err
		}
		mf := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, nsB, nil)
		mf.ForResource(configmaps).Informer()
		mf.ForResource(secrets).Informer()
		mf.Start(stop)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			rawWatches(wctx, r, "raw-json", proxy+"/api/v1/configmaps", "app=mkcorpus,tier=gold", "application/json", true, []int{90, 75, 110})
		}()
		go func() {
			defer wg.Done()
			rawWatches(wctx, r, "raw-protobuf", proxy+"/api/v1/namespaces/"+e.ns+"/secrets", "", "application/vnd.kubernetes.protobuf", false, []int{80, 130})
		}()
		for gvr, ok := range df.WaitForCacheSync(stop) {
			if !ok {
				err = fmt.Errorf("%v did not sync", gvr)
			}
		}
		for gvr, ok := range mf.WaitForCacheSync(stop) {
			if !ok {
				err = fmt.Errorf("%v did not sync", gvr)
			}
		}
		if err == nil {
			time.Sleep(time.Second)
			err = w.run(ctx, time.Now().Add(soakDuration))
		}
		time.Sleep(2 * time.Second)
		cancel()
		close(stop)
		df.Shutdown()
		mf.Shutdown()
		wg.Wait()
		return err
	})
	if err != nil {
		return err
	}
	if err := r.write(e.dir + "/truth.jsonl"); err != nil {
		return err
	}
	log.Printf("long-soak: %d events received, %d workload operations", len(r.truth), len(w.ops))
	return e.meta(map[string]any{
		"clients": "through kubectl proxy: client-go dynamicinformer (configmaps, secrets of NS; JSON), metadatainformer (configmaps, secrets of NS-b; protobuf PartialObjectMetadata), " +
			"a raw JSON watch of configmaps in every namespace with labelSelector app=mkcorpus,tier=gold and bookmarks, re-watched from its last resourceVersion at each timeoutSeconds (90, 75, 110), " +
			"a raw protobuf watch of the secrets of NS restarted without a resourceVersion at each timeoutSeconds (80, 130)",
		"truth_source": "what the clients read, split by client-go's framers (JSON, length-delimited protobuf)",
		"duration":     soakDuration.String(),
	}, r, w.ops, cmdline)
}

// rawWatches watches url (label selector sel, media type accept) until
// ctx ends, one watch after the other, each ending at its timeout; resume
// re-watches from the last resourceVersion a JSON stream showed (none
// after a 410), else from none.
func rawWatches(ctx context.Context, r *recorder, client, u, sel, accept string, resume bool, timeouts []int) {
	hc := &http.Client{Transport: r.wrap(client, http.DefaultTransport.(*http.Transport).Clone())}
	defer hc.CloseIdleConnections()
	rv := ""
	for i := 0; ctx.Err() == nil; i++ {
		q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "timeoutSeconds": {fmt.Sprint(timeouts[i%len(timeouts)])}}
		if sel != "" {
			q.Set("labelSelector", sel)
		}
		if rv != "" {
			q.Set("resourceVersion", rv)
		}
		req, err := http.NewRequestWithContext(ctx, "GET", u+"?"+q.Encode(), nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				log.Printf("%s: %v", client, err)
				time.Sleep(time.Second)
			}
			continue
		}
		if !resume {
			drain(resp.Body)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Code     int `json:"code"`
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch {
			case ev.Type == "ERROR" && ev.Object.Code == 410:
				rv = ""
			case ev.Object.Metadata.ResourceVersion != "":
				rv = ev.Object.Metadata.ResourceVersion
			}
		}
		drain(resp.Body)
	}
}

// soakWorkload keeps pools of configmaps and secrets in its namespaces
// and changes them at random (seeded).
type soakWorkload struct {
	e      *env
	hc     *http.Client
	ns     []string
	rng    *rand.Rand
	live   map[string][]soakObj // by namespace/kind
	next   int
	ops    []op
	failed int // requests the apiserver did not answer (timeouts under load)
}

type soakObj struct{ ns, kind, name, tier string }

// Pool bounds of the soak: per namespace.
const (
	soakMinCM, soakMaxCM         = 40, 140
	soakMinSecret, soakMaxSecret = 10, 50
)

func newSoakWorkload(e *env, hc *http.Client, ns []string, seed uint64) *soakWorkload {
	return &soakWorkload{e: e, hc: hc, ns: ns, rng: rand.New(rand.NewPCG(seed, 0x736f616b)), live: map[string][]soakObj{}}
}

// fill creates the pools' minimum before the capture starts.
func (w *soakWorkload) fill(ctx context.Context) error {
	for _, ns := range w.ns {
		for range soakMinCM + 20 {
			if err := w.create(ctx, ns, "configmaps"); err != nil {
				return err
			}
		}
		for range soakMinSecret + 5 {
			if err := w.create(ctx, ns, "secrets"); err != nil {
				return err
			}
		}
	}
	w.ops = nil
	return nil
}

// text returns n printable bytes, like the configuration values of a
// real cluster (words, numbers, separators).
func (w *soakWorkload) text(n int) string {
	words := []string{"enabled", "replicas", "timeout", "endpoint", "region", "cache", "level", "retry", "max", "interval", "feature", "service", "port", "host", "mode"}
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%s=%d;", words[w.rng.IntN(len(words))], w.rng.IntN(100000))
	}
	return b.String()[:n]
}

func (w *soakWorkload) body(o soakObj) map[string]any {
	m := map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": o.name, "namespace": o.ns,
		"labels": map[string]string{"app": "mkcorpus", "tier": o.tier}}}
	if o.kind == "secrets" {
		m["kind"] = "Secret"
		m["data"] = map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("mkcorpus-throwaway-%016x", w.rng.Uint64()))),
			"config": base64.StdEncoding.EncodeToString([]byte(w.text(100 + w.rng.IntN(300))))}
	} else {
		m["kind"] = "ConfigMap"
		m["data"] = map[string]string{"settings": w.text(300 + w.rng.IntN(500)), "version": fmt.Sprint(w.rng.IntN(1000))}
	}
	return m
}

// do sends one request. An answer the apiserver gives under load (a
// timeout of etcd, 429, 5xx) or a failed connection is logged and counted:
// the soak goes on, as a real cluster's clients would; ok is false then.
func (w *soakWorkload) do(ctx context.Context, method, path string, body any) (ok bool, err error) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	code, rb, err := w.e.c.do(ctx, w.hc, method, path, "application/json", b)
	if err == nil && code >= 300 && code != 429 && code < 500 {
		return false, fmt.Errorf("%s %s: %d %s", method, path, code, rb)
	}
	if err != nil || code >= 300 {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		w.failed++
		log.Printf("long-soak: %s %s: %d %v %.200s (going on)", method, path, code, err, rb)
		time.Sleep(time.Second)
		return false, nil
	}
	w.ops = append(w.ops, op{Method: method, Path: path, Status: code, Time: time.Now().UnixNano()})
	return true, nil
}

func (w *soakWorkload) create(ctx context.Context, ns, kind string) error {
	tier := "silver"
	if w.rng.IntN(2) == 0 {
		tier = "gold"
	}
	o := soakObj{ns: ns, kind: kind, name: fmt.Sprintf("%s-%05d", kind[:len(kind)-1], w.next), tier: tier}
	w.next++
	ok, err := w.do(ctx, "POST", "/api/v1/namespaces/"+ns+"/"+kind, w.body(o))
	if ok {
		w.live[ns+"/"+kind] = append(w.live[ns+"/"+kind], o)
	}
	return err
}

// run changes objects until the deadline: 55% updates, 25% creates (while
// a pool is under its maximum), 20% deletes (while it is over its
// minimum); mostly a few ms apart, one in ten followed by up to 800 ms of
// quiet.
func (w *soakWorkload) run(ctx context.Context, until time.Time) error {
	for time.Now().Before(until) {
		if err := ctx.Err(); err != nil {
			return err
		}
		ns := w.ns[w.rng.IntN(len(w.ns))]
		kind, lo, hi := "configmaps", soakMinCM, soakMaxCM
		if w.rng.IntN(4) == 0 {
			kind, lo, hi = "secrets", soakMinSecret, soakMaxSecret
		}
		pool := w.live[ns+"/"+kind]
		var err error
		switch k := w.rng.IntN(20); {
		case k < 5 && len(pool) < hi:
			err = w.create(ctx, ns, kind)
		case k < 9 && len(pool) > lo:
			j := w.rng.IntN(len(pool))
			o := pool[j]
			w.live[ns+"/"+kind] = append(pool[:j], pool[j+1:]...)
			if _, err = w.do(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/"+kind+"/"+o.name, nil); err != nil && strings.Contains(err.Error(), ": 404 ") {
				err = nil // a DELETE that timed out may have been done
			}
		default:
			o := &pool[w.rng.IntN(len(pool))]
			if w.rng.IntN(10) == 0 {
				o.tier = map[string]string{"gold": "silver", "silver": "gold"}[o.tier] // moves in or out of a selector
			}
			_, err = w.do(ctx, "PUT", "/api/v1/namespaces/"+ns+"/"+kind+"/"+o.name, w.body(*o))
		}
		if err != nil {
			return err
		}
		if w.rng.IntN(10) == 0 {
			time.Sleep(time.Duration(200+w.rng.IntN(600)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(5+w.rng.IntN(55)) * time.Millisecond)
		}
	}
	log.Printf("long-soak: %d operations, %d not answered", len(w.ops), w.failed)
	return nil
}
