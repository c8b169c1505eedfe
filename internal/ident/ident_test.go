package ident

import "testing"

func TestOf(t *testing.T) {
	dsPod := `{"kind":"Pod","metadata":{"generateName":"agent-"},"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["node-2"]}]}]}}}}}`
	for _, tc := range []struct{ name, doc, want string }{
		{"daemonset pod", dsPod, "node=node-2"},
		{"indexed job pod", `{"kind":"Pod","metadata":{"annotations":{"batch.kubernetes.io/job-completion-index":"3"},"labels":{"apps.kubernetes.io/pod-index":"3"}}}`, "index=3"},
		{"statefulset pod", `{"metadata":{"labels":{"apps.kubernetes.io/pod-index":"0"}}}`, "ordinal=0"},
		{"bound pod", `{"kind":"Pod","spec":{"nodeName":"n1"}}`, "node=n1"},
		{"plain pod", `{"kind":"Pod","metadata":{"generateName":"web-"}}`, ""},
		{"not a pod", `{"kind":"ConfigMap","spec":{"nodeName":"n1"}}`, ""},
		{"bad index", `{"metadata":{"labels":{"apps.kubernetes.io/pod-index":"01"}}}`, ""},
		{"two nodes", `{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["a","b"]}]}]}}}}}`, ""},
		{"not json", `{`, ""},
	} {
		if got := Of([]byte(tc.doc)); got != tc.want {
			t.Errorf("%s: Of(%s) = %q; want %q", tc.name, tc.doc, got, tc.want)
		}
	}
}

// FuzzOf: any bytes, no panic; an identity is one of the three forms.
func FuzzOf(f *testing.F) {
	f.Add([]byte(`{"kind":"Pod","spec":{"nodeName":"n1"}}`))
	f.Add([]byte(`{"metadata":{"labels":{"apps.kubernetes.io/pod-index":"7"}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = Of(doc)
	})
}
