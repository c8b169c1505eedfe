package tape

import (
	"strings"
	"testing"

	"github.com/wtrace/wtrace/internal/apipath"
)

// FuzzParseTarget: any request-target a client sends is parsed or
// refused, never a panic, and a parsed one has a key and a bounded
// timeout.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5&timeoutSeconds=30",
		"/api/v1/watch/namespaces/a/configmaps?labelSelector=app%3Dx",
		"/api/v1/pods?watch=false&sendInitialEvents=true&timeoutSeconds=abc",
		"/api/v1/pods?continue=tok&timeoutSeconds=99999999999",
		"/a?%zz",
		"nopath",
	} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		q, err := ParseTarget(method, target)
		if err != nil {
			return
		}
		if len(target) > apipath.MaxTargetLen || q.Key == "" || q.Method != strings.ToUpper(method) || q.Timeout < 0 || q.Timeout > maxTimeoutSeconds*1e9 {
			t.Fatalf("ParseTarget(%q, %q) = %+v", method, target, q)
		}
	})
}
