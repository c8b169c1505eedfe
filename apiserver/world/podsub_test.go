package world_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestPartialSubresources: a Pod's ephemeralcontainers and resize, a
// CertificateSigningRequest's approval, as kube-apiserver v1.33's
// strategies answer them (the conformance harness compares them with the
// real one): each changes only its part, a Pod's generation follows its
// spec, a resize that changes the QoS class and a PUT that changes the
// spec of a Pod are refused.
func TestPartialSubresources(t *testing.T) {
	st, _ := load(t, "basic-json")
	js := http.Header{"Content-Type": {"application/json"}}
	smp := http.Header{"Content-Type": {"application/strategic-merge-patch+json"}}
	merge := http.Header{"Content-Type": {"application/merge-patch+json"}}
	const pods = "/api/v1/namespaces/corpus-basic/pods"
	if r := do(t, st, "POST", pods, "", js, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1"}},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}`); r.Code != 201 {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	pod := func(b []byte) corev1.Pod {
		t.Helper()
		var p corev1.Pod
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return p
	}
	for _, tc := range []struct {
		name, method, path string
		h                  http.Header
		body               string
		code               int
		check              func(t *testing.T, b []byte)
	}{
		{"debug container", "PATCH", pods + "/p/ephemeralcontainers", smp,
			`{"metadata":{"labels":{"a":"2"}},"spec":{"ephemeralContainers":[{"name":"debug","image":"busybox:1.36","targetContainerName":"c"}]}}`, 200,
			func(t *testing.T, b []byte) {
				p := pod(b)
				if len(p.Spec.EphemeralContainers) != 1 || p.Spec.EphemeralContainers[0].TerminationMessagePath == "" {
					t.Errorf("ephemeral containers (defaulted): %+v", p.Spec.EphemeralContainers)
				}
				if p.Labels["a"] != "1" || p.Generation != 2 {
					t.Errorf("labels %v (the subresource keeps them), generation %d (want 2)", p.Labels, p.Generation)
				}
				if mf := p.ManagedFields; len(mf) != 2 || mf[1].Subresource != "ephemeralcontainers" {
					t.Errorf("managed fields: %+v", mf)
				}
			}},
		{"get through the subresource", "GET", pods + "/p/ephemeralcontainers", nil, "", 200,
			func(t *testing.T, b []byte) {
				if p := pod(b); p.Kind != "Pod" || len(p.Spec.EphemeralContainers) != 1 {
					t.Errorf("%s", b)
				}
			}},
		{"resize that changes the QoS class", "PATCH", pods + "/p/resize", smp,
			`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m"}}}]}}`, 422,
			func(t *testing.T, b []byte) {
				if !strings.Contains(string(b), "Pod QOS Class may not change as a result of resizing") {
					t.Errorf("%s", b)
				}
			}},
		{"spec changed through the Pod", "PATCH", pods + "/p", smp,
			`{"spec":{"containers":[{"name":"c","workingDir":"/tmp"}]}}`, 422,
			func(t *testing.T, b []byte) {
				if !strings.Contains(string(b), "pod updates may not change fields other than") {
					t.Errorf("%s", b)
				}
			}},
		{"image changed through the Pod", "PATCH", pods + "/p", smp,
			`{"spec":{"containers":[{"name":"c","image":"busybox:1.37"}]}}`, 200,
			func(t *testing.T, b []byte) {
				if p := pod(b); p.Spec.Containers[0].Image != "busybox:1.37" || p.Generation != 3 {
					t.Errorf("image %s, generation %d (want 3)", p.Spec.Containers[0].Image, p.Generation)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, st, tc.method, tc.path, "", tc.h, tc.body)
			if r.Code != tc.code {
				t.Fatalf("%d, want %d: %s", r.Code, tc.code, r.Body)
			}
			tc.check(t, r.Body)
		})
	}

	const csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	if r := do(t, st, "POST", csrs, "", js, `{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"csr"},"spec":{"request":"`+testCSR+`","signerName":"example.com/x","usages":["digital signature"]}}`); r.Code != 201 {
		t.Fatalf("create CSR: %d %s", r.Code, r.Body)
	}
	r := do(t, st, "PATCH", csrs+"/csr/approval", "", merge,
		`{"spec":{"signerName":"example.com/other"},"status":{"certificate":"eA==","conditions":[{"type":"Approved","status":"True","reason":"R","message":"m"}]}}`)
	var csr certificatesv1.CertificateSigningRequest
	if err := json.Unmarshal(r.Body, &csr); err != nil || r.Code != 200 {
		t.Fatalf("approve: %d %s", r.Code, r.Body)
	}
	if csr.Spec.SignerName != "example.com/x" || len(csr.Status.Certificate) != 0 {
		t.Errorf("the approval changed more than the conditions: signer %q, certificate %q", csr.Spec.SignerName, csr.Status.Certificate)
	}
	if c := csr.Status.Conditions; len(c) != 1 || c[0].LastUpdateTime.IsZero() || c[0].LastTransitionTime.IsZero() {
		t.Errorf("conditions (stamped): %+v", c)
	}
}

// testCSR is a PEM certificate request (base64), as a CSR's spec.request
// holds it.
const testCSR = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlISU1IQUNBUUF3RGpFTU1Bb0dBMVVFQXhNRGQyTm1NRmt3RXdZSEtvWkl6ajBDQVFZSUtvWkl6ajBEQVFjRApRZ0FFR1dyaDJES2FnTkVHbFdJd0J1RElRVXYvbS81dGZGYjJDZi9sMS84Nm83T2VXNUxrbVNFbERXSHcyblRsCnpxSDRENm5QY1cwZHdpVkZzT0ZyeStuNVBLQUFNQW9HQ0NxR1NNNDlCQU1DQTBnQU1FVUNJQVg1dWpyS3Q0RkgKbVNzT3VFV1FnNFVMUUd0Zi9tTkF3M05ySGZ0NDZUMHFBaUVBbnMyOE1OaDBQcDV4YjMycll1SHM2K3h5U3JTZgo0aUNjZDVtS1FSYkpmVzQ9Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo="
