package main

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestPushPullReplay: `wtrace push` puts a session into a registry on
// loopback (go-containerregistry's) and prints its reference by digest;
// `wtrace pull` gives the file back byte for byte; `wtrace replay
// oci://…` and `wtrace replay https://…` serve it (a watch gets the
// recording's 200 events).
func TestPushPullReplay(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())), registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	session := wttest.RecordCorpus(t, "basic-json", false)
	orig, _ := os.ReadFile(session)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/sessions/basic:v1"
	stdout, stderr, code := wtrace(t, "push", session, ref)
	if code != 0 || !strings.HasPrefix(stdout, strings.TrimPrefix(reg.URL, "http://")+"/sessions/basic@sha256:") || !strings.Contains(stderr, "Pushed ") {
		t.Fatalf("push: exit %d\n%s%s", code, stdout, stderr)
	}
	pulled := filepath.Join(t.TempDir(), "pulled.wt")
	if _, stderr, code := wtrace(t, "pull", strings.TrimSpace(stdout), "-o", pulled); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(pulled); !bytes.Equal(b, orig) {
		t.Error("the pulled session differs from the pushed one")
	}
	files := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(session))))
	defer files.Close()
	for _, src := range []string{"oci://" + ref, files.URL + "/" + filepath.Base(session)} {
		t.Run(strings.SplitN(src, ":", 2)[0], func(t *testing.T) {
			c := startChild(t, "replay", src, "--listen", "127.0.0.1:0", "--speed", "0", "--writes", "reject")
			base := waitMatch(t, c.errw.lines, `^Listening on (http://127\.0\.0\.1:\d+)`, c.errw.String)[1]
			w := openRawWatch(t, base, "/api/v1/namespaces/corpus-basic/configmaps?watch=true&resourceVersion=205&timeoutSeconds=30")
			if r := readEvents(w.resp.Body); r.events != 200 {
				t.Errorf("replay %s: a watch got %d events (%v); want 200", src, r.events, r.err)
			}
			if !strings.Contains(c.errw.String(), "Fetched "+src) {
				t.Errorf("no fetch line:\n%s", c.errw.String())
			}
			c.signal(t, syscall.SIGTERM)
			if code := c.wait(t); code != 0 {
				t.Errorf("exit %d:\n%s", code, c.errw.String())
			}
		})
	}
	if _, stderr, code := wtrace(t, "replay", "oci://"+strings.TrimPrefix(reg.URL, "http://")+"/sessions/none:v1", "--listen", "127.0.0.1:0"); code != 1 || !strings.Contains(stderr, "Try: check the source") {
		t.Errorf("replay of a missing artifact: exit %d: %s", code, stderr)
	}
}
