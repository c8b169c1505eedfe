package replay_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/k8stest"
)

// TestKubectlAPISurface: what kubectl asks of an apiserver besides reads
// and writes of objects, against a world replay with the real kubectl:
// kubectl version shows the server as kube-apiserver v1.33 and warns of
// no skew, kubectl auth can-i says yes (a SelfSubjectAccessReview, as for
// an administrator), kubectl create token prints a token of the account
// (a TokenRequest) that a token review authenticates, and kubectl gets a
// resource the session never showed through discovery (csr).
func TestKubectlAPISurface(t *testing.T) {
	kubectl := k8stest.Kubectl(t)
	srv := replaytest.NewServer(t, replay.CorpusSession(t, "basic-json"), replay.Options{Writes: replay.WritesAnswer})
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, srv.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc, "-n", "corpus-basic"}, args...)...)
		out, err := cmd.CombinedOutput()
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	if out := run("version"); !strings.Contains(out, "Server Version: v1.33.") || strings.Contains(out, "WARNING") {
		t.Errorf("kubectl version:\n%s\nwant the server at v1.33 and no warning", out)
	}
	for _, args := range [][]string{{"create", "deployments"}, {"delete", "pods"}, {"get", "secrets", "--all-namespaces"}} {
		if out := run(append([]string{"auth", "can-i"}, args...)...); strings.TrimSpace(out) != "yes" {
			t.Errorf("kubectl auth can-i %s: %q; want yes", strings.Join(args, " "), out)
		}
	}
	run("create", "serviceaccount", "bot")
	tok := strings.TrimSpace(run("create", "token", "bot", "--duration", "20m"))
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("kubectl create token printed %q; want a JWT", tok)
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Sub      string `json:"sub"`
		Exp, Iat int64
	}
	if err := json.Unmarshal(claims, &c); err != nil || c.Sub != "system:serviceaccount:corpus-basic:bot" || c.Exp-c.Iat != 20*60 {
		t.Errorf("the token's claims %s (%v); want the account's subject, 20 minutes", claims, err)
	}
	review := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + tok + `"}}`
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "create", "-f", "-", "-o", "jsonpath={.status.authenticated} {.status.user.username}")
	cmd.Stdin = strings.NewReader(review)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "true system:serviceaccount:corpus-basic:bot" {
		t.Errorf("a review of the token: %s (%v); want it authenticated as the account", out, err)
	}
	if out := run("get", "csr"); !strings.Contains(out, "No resources found") {
		t.Errorf("kubectl get csr: %q; want none found (discovery knows the resource)", out)
	}
}
