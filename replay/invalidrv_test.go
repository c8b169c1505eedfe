package replay

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/wtrace/wtrace/testkit/k8stest"
)

// TestWatchInvalidRV: a watch from a resourceVersion that is not a number
// gets what kube-apiserver v1.33 answers (asked here, the real binary):
// 500 and the same Status, in the client's encoding — where the replay
// sent 200 and an ERROR 410 Expired event.
func TestWatchInvalidRV(t *testing.T) {
	path := corpusSession(t, "basic-json")
	srv, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	c := k8stest.Start(t)
	const ns = "/api/v1/namespaces/corpus-basic/configmaps"
	for _, target := range []string{
		ns + "?watch=true&resourceVersion=abc",
		ns + "?watch=1&resourceVersion=-1&timeoutSeconds=5",
		ns + "?watch=true&resourceVersion=99999999999999999999999",
		"/api/v1/watch/namespaces/corpus-basic/configmaps?resourceVersion=abc",
	} {
		for _, accept := range []string{"", "application/json", "application/vnd.kubernetes.protobuf;type=watch, application/json"} {
			h := http.Header{}
			if accept != "" {
				h.Set("Accept", accept)
			}
			want, wantBody := c.Do("GET", target, h, nil)
			req, _ := http.NewRequest("GET", srv.URL+target, nil)
			req.Header = h
			got, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			gotBody, _ := io.ReadAll(got.Body)
			got.Body.Close()
			if got.StatusCode != want.StatusCode || got.Header.Get("Content-Type") != want.Header.Get("Content-Type") || !bytes.Equal(gotBody, wantBody) {
				t.Errorf("GET %s (Accept %q):\nreplay    %d %s %q\napiserver %d %s %q", target, accept,
					got.StatusCode, got.Header.Get("Content-Type"), gotBody, want.StatusCode, want.Header.Get("Content-Type"), wantBody)
			}
		}
	}
}
