package apipath_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/testkit/k8stest"
)

// TestParseAgainstAPIServer: for each of k8stest.ReadingTargets, Parse says a watch
// exactly when the real kube-apiserver streams watch events, a GET of one
// object when it answers the object, and a LIST when it answers a list.
func TestParseAgainstAPIServer(t *testing.T) {
	c := k8stest.Start(t)
	if resp, b := c.Do("POST", "/api/v1/namespaces/"+k8stest.ReadingNamespace+"/configmaps", nil, []byte(`{"metadata":{"name":"`+k8stest.ReadingConfigMap+`"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create configmap: %d %s", resp.StatusCode, b)
	}
	for _, tc := range k8stest.ReadingTargets {
		r, err := apipath.Parse(tc.Method, tc.Target)
		if err != nil {
			t.Fatalf("Parse(%s, %q) = %v", tc.Method, tc.Target, err)
		}
		resp, body := c.Do(tc.Method, tc.Target, nil, nil)
		ct := resp.Header.Get("Content-Type")
		var kind struct{ Kind string }
		_ = json.Unmarshal(body, &kind)
		streamed := resp.StatusCode == 200 && bytes.HasPrefix(body, []byte(`{"type":`))
		t.Logf("%s %s: %d %s, watch %v, kind %q; Parse: verb %s, watch %v, name %q", tc.Method, tc.Target, resp.StatusCode, ct, streamed, kind.Kind, r.Verb, r.Watch, r.Name)
		if r.Watch != streamed {
			t.Errorf("Parse(%s, %q).Watch = %v; kube-apiserver streamed a watch: %v", tc.Method, tc.Target, r.Watch, streamed)
		}
		if tc.Method != "GET" || streamed {
			continue
		}
		switch {
		case r.Verb == "get" && kind.Kind != "ConfigMap", r.Verb == "list" && !strings.HasSuffix(kind.Kind, "List"):
			t.Errorf("Parse(%s, %q): verb %s, name %q; kube-apiserver answered a %s", tc.Method, tc.Target, r.Verb, r.Name, kind.Kind)
		}
	}
}
