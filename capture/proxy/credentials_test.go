package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestServerURLCredentials: credentials in the kubeconfig's server URL — a
// query parameter (access_token=…), userinfo (user:pass@) — never reach
// the Cluster's Server, nor the session's Meta (its description, its
// "server" label) or index: they are removed as a request's are.
func TestServerURLCredentials(t *testing.T) {
	const token, pass = "url-token-5be21f0c77", "url-password-a81c"
	up := newUpstream(t, testEvents(3))
	server := strings.Replace(up.URL, "https://", "https://admin:"+pass+"@", 1) + "/?access_token=" + token + "&x=1"
	kc := kubeconfig(t, server, certPEM(up.Server), "current-context: ctx\n")
	cl, err := LoadConfig(kc, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cl.Server, token) || strings.Contains(cl.Server, pass) || !strings.Contains(cl.Server, "access_token=") {
		t.Errorf("Cluster.Server = %q; want the URL without its credentials", cl.Server)
	}
	r := startRecording(t, kc, false, time.Second)
	r.stop(t)
	wttest.CheckNoSecrets(t, r.path, token, pass) // the Meta record among the others
	f, err := formats.Open(r.path, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := f.Index().Meta // the index's copy
	for _, s := range []string{m.Description, m.Labels["server"]} {
		if strings.Contains(s, token) || strings.Contains(s, pass) || s == "" {
			t.Errorf("the session's index holds a credential of the server URL (or nothing): %q", s)
		}
	}
}
