package deploy

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wtrace/wtrace/artifact"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// soakList is a LIST the soak session recorded (exchange 1).
const soakList = "/api/v1/namespaces/corpus-soak-a/configmaps"

// TestSessionSources: a 66 MB session (wttest.RecordSoak: the real long
// soak's copies overlapping, about 440,000 events), pushed as an OCI artifact to a registry on loopback
// (go-containerregistry's), is replayed by the pods of the default
// kustomization — fetched from the registry at start, its startup probe
// waiting until it is loaded — and by each variant: writes answered (the
// same source), fetched from a URL (checked against its digest), from a
// claim the load Job filled with wtrace pull. Each replica answers a LIST
// the session recorded, through its port as a Service's client asks
// (Host wtrace-replay). The ConfigMap variant holds sessions of 1 MiB at
// most (TestConfigMapLimit): it replays its own small session. See
// pod_test.go for how a pod is run here.
func TestSessionSources(t *testing.T) {
	if testing.Short() {
		t.Skip("records the 65 MB soak session and replays it five times")
	}
	session := wttest.RecordSoak(t, 530<<20) // the long soak's copies overlapping, 66 MB recorded
	st, err := os.Stat(session)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 65e6 {
		t.Fatalf("the soak session is %d bytes; want 65 MB", st.Size())
	}
	t.Logf("the session: %d bytes", st.Size())
	reg := httptest.NewServer(registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())), registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref := strings.TrimPrefix(reg.URL, "http://") + "/wtrace/sessions/soak:v1"
	start := time.Now()
	pushed, err := artifact.Push(context.Background(), session, ref, artifact.PushOptions{})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	t.Logf("pushed %d bytes to %s in %v", pushed.Size, pushed.Reference, time.Since(start).Round(time.Millisecond))
	files := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(session))))
	defer files.Close()
	url := files.URL + "/" + filepath.Base(session) + "#" + strings.Replace(pushed.Digest, ":", "=", 1)

	cases := []struct {
		dir, source string
		claim       bool   // the claim is filled by the load Job first
		list        string // a LIST the session recorded
	}{
		{dir: ".", source: "oci://" + ref, list: soakList},
		{dir: "overlays/writes-answer", source: "oci://" + pushed.Reference, list: soakList},
		{dir: "overlays/session-fetch", source: url, list: soakList},
		{dir: "overlays/session-pvc", source: "oci://" + ref, claim: true, list: soakList},
		// Its own session.wt: a recording of testdata/corpus/basic-json.
		{dir: "overlays/session-configmap", list: "/api/v1/namespaces/corpus-basic/configmaps"},
	}
	var pods []*pod
	defer func() { stopAll(t, pods) }() // their shutdown delays at once
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			claims := map[string]string{}
			if tc.claim {
				claims["wtrace-sessions"] = t.TempDir()
				load := objects(t, build(t, "overlays/session-pvc/load"))
				setSource(t, load, "wtrace-session-load", tc.source)
				start := time.Now()
				out := newPod(t, load, "Job", "wtrace-session-load", claims).run()
				t.Logf("the load Job: %s (%v)", strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))
			}
			objs := objects(t, build(t, tc.dir))
			if tc.source != "" && !tc.claim {
				setSource(t, objs, "wtrace-session", tc.source)
			}
			p := newPod(t, objs, "Deployment", "wtrace-replay", claims)
			p.deferred = true
			pods = append(pods, p)
			start := time.Now()
			addr := p.start("http")
			ready := time.Since(start)
			req, _ := http.NewRequest("GET", "http://"+addr+tc.list, nil)
			req.Host = "wtrace-replay:8080"
			req.Header.Set("Accept", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var list struct {
				Kind  string
				Items []json.RawMessage
			}
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 || list.Kind != "ConfigMapList" {
				t.Fatalf("GET %s: %s, %v, kind %q", tc.list, resp.Status, err, list.Kind)
			}
			if len(list.Items) == 0 {
				t.Errorf("GET %s: no items; the session recorded some", tc.list)
			}
			t.Logf("ready in %v (fetch and load), LIST: %d ConfigMaps", ready.Round(time.Millisecond), len(list.Items))
		})
	}
}

// setSource sets the session source of the build's ConfigMap name (what
// a user's kustomization does with configMapGenerator behavior: replace).
func setSource(t *testing.T, objs []*unstructured.Unstructured, name, source string) {
	t.Helper()
	for _, o := range objs {
		if hash, ok := strings.CutPrefix(o.GetName(), name+"-"); ok && o.GetKind() == "ConfigMap" && !strings.Contains(hash, "-") {
			if err := unstructured.SetNestedField(o.Object, source, "data", "source"); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no ConfigMap %s in the build", name)
}
