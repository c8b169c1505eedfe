package world_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// TestRegistryRules: what kube-apiserver v1.33's registries and in-process
// controllers do besides storing a write, as the conformance harness
// found them (each case's answer compared with the real apiserver's
// there): a CSR's requestor, its spec and status no manager of the main
// resource owns; an RC's delete orphans; the namespace registry's own
// precondition words; a new PVC's first update writes; the APF
// controller's Dangling condition; an IPAddress's generateName is its
// name; a ServiceCIDR's status manager owns the labels it sent.
func TestRegistryRules(t *testing.T) {
	user := &authenticationv1.UserInfo{Username: "alice", UID: "alice-uid", Groups: []string{"dev", "system:authenticated"}}
	f := wttest.OpenSession(t, wttest.RecordCorpus(t, "basic-json", false))
	st, err := world.Load(f, world.Options{User: user})
	if err != nil {
		t.Fatal(err)
	}
	js := http.Header{"Content-Type": {"application/json"}}
	merge := http.Header{"Content-Type": {"application/merge-patch+json"}}
	decode := func(t *testing.T, b []byte, into any) {
		t.Helper()
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	const csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	const csrBody = `{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"c"},` +
		`"spec":{"username":"mallory","groups":["system:masters"],"request":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlISU1IQUNBUUF3RGpFTU1Bb0dBMVVFQXhNRGQyTm1NRmt3RXdZSEtvWkl6ajBDQVFZSUtvWkl6ajBEQVFjRApRZ0FFYldFa3hKYm1LRG93dUovOWlYbzJ4bkNKMTNYcHF5cHZqc1JYNHZNaDFJdTlhNnN4RlpzOGJLbVU1bGpJCjZYSHpDa0xJZUd4VDcrTU9KeDdlZWgwYlFhQUFNQW9HQ0NxR1NNNDlCQU1DQTBnQU1FVUNJUUM3VUJOc2VTbDIKS2ZjK2JDVmZUOHdyQit1bk1obldjYUhkSWgvUjh1TmVsQUlnZE9XUWtMRmFpUnRSZ0RWSEN4eWVJbTU0VHptOApOTWNKd3Z4UW5jU1NOZ1U9Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo=",` +
		`"signerName":"example.com/x","usages":["digital signature"]}}`
	const ns = "/api/v1/namespaces/rules"
	for _, tc := range []struct {
		name, method, path, query string
		h                         http.Header
		body                      string
		code                      int
		check                     func(t *testing.T, b []byte)
	}{
		{"namespace of the cases", "POST", "/api/v1/namespaces", "", js, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rules"}}`, 201, nil},
		{"CSR create: the requestor is the user", "POST", csrs, "", js, csrBody, 201, func(t *testing.T, b []byte) {
			var c certificatesv1.CertificateSigningRequest
			decode(t, b, &c)
			if c.Spec.Username != "alice" || c.Spec.UID != "alice-uid" || strings.Join(c.Spec.Groups, ",") != "dev,system:authenticated" {
				t.Errorf("requestor %q %q %v, want alice's", c.Spec.Username, c.Spec.UID, c.Spec.Groups)
			}
			for _, mf := range c.ManagedFields {
				if strings.Contains(string(mf.FieldsV1.Raw), "f:spec") {
					t.Errorf("managed fields %+v: nobody owns the spec", c.ManagedFields)
				}
			}
		}},
		{"CSR update keeps the spec", "PATCH", csrs + "/c", "", merge, `{"metadata":{"labels":{"a":"1"}},"spec":{"username":"bob"}}`, 200, func(t *testing.T, b []byte) {
			var c certificatesv1.CertificateSigningRequest
			decode(t, b, &c)
			if c.Spec.Username != "alice" || c.Labels["a"] != "1" {
				t.Errorf("username %q labels %v", c.Spec.Username, c.Labels)
			}
		}},
		{"self subject review names the user", "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "", js,
			`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`, 201, func(t *testing.T, b []byte) {
				var r authenticationv1.SelfSubjectReview
				decode(t, b, &r)
				if r.Status.UserInfo.Username != "alice" || r.Status.UserInfo.UID != "alice-uid" {
					t.Errorf("user %+v", r.Status.UserInfo)
				}
			}},
		{"RC create", "POST", ns + "/replicationcontrollers", "", js,
			`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"rc"},"spec":{"replicas":0,"selector":{"a":"1"},"template":{"metadata":{"labels":{"a":"1"}},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}}}`, 201, nil},
		{"RC delete orphans by default", "DELETE", ns + "/replicationcontrollers/rc", "", nil, "", 200, func(t *testing.T, b []byte) {
			var rc corev1.ReplicationController
			decode(t, b, &rc)
			if rc.Kind != "ReplicationController" || rc.DeletionTimestamp == nil || strings.Join(rc.Finalizers, ",") != metav1.FinalizerOrphanDependents {
				t.Errorf("kind %q deletionTimestamp %v finalizers %v", rc.Kind, rc.DeletionTimestamp, rc.Finalizers)
			}
		}},
		{"namespace create", "POST", "/api/v1/namespaces", "", js, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"gone"}}`, 201, nil},
		{"namespace precondition", "DELETE", "/api/v1/namespaces/gone", "", js, `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`, 409,
			func(t *testing.T, b []byte) {
				var s metav1.Status
				decode(t, b, &s)
				if s.Details == nil || s.Details.Kind != "namespaces" || !strings.Contains(s.Message, `on namespaces "gone": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: `) {
					t.Errorf("%s", b)
				}
			}},
		{"PVC create", "POST", ns + "/persistentvolumeclaims", "", js,
			`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"pvc"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`, 201, nil},
		{"PVC first update writes", "PATCH", ns + "/persistentvolumeclaims/pvc/status", "", merge, `{}`, 200, func(t *testing.T, b []byte) {
			if rv := rvOf(t, b); rv == pvcCreateRV {
				t.Errorf("resourceVersion %s, the create's: no new version", rv)
			}
		}},
		{"PVC second update does not", "PATCH", ns + "/persistentvolumeclaims/pvc/status", "", merge, `{}`, 200, func(t *testing.T, b []byte) {
			if rv := rvOf(t, b); rv != pvcFirstRV {
				t.Errorf("resourceVersion %s, want %s (nothing changed)", rv, pvcFirstRV)
			}
		}},
		{"FlowSchema create answers before the controller", "POST", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", "", js,
			`{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"fs"},"spec":{"priorityLevelConfiguration":{"name":"pl"},"matchingPrecedence":9000}}`, 201,
			func(t *testing.T, b []byte) {
				var fs flowcontrolv1.FlowSchema
				decode(t, b, &fs)
				if len(fs.Status.Conditions) != 0 {
					t.Errorf("conditions %+v in the create's answer", fs.Status.Conditions)
				}
			}},
		{"FlowSchema dangling", "GET", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/fs", "", nil, "", 200, func(t *testing.T, b []byte) {
			checkDangling(t, b, "True", "NotFound")
		}},
		{"PriorityLevelConfiguration create", "POST", "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", "", js,
			`{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"pl"},"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":5,"limitResponse":{"type":"Reject"}}}}`, 201, nil},
		{"FlowSchema found", "GET", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/fs", "", nil, "", 200, func(t *testing.T, b []byte) {
			checkDangling(t, b, "False", "Found")
		}},
		{"IPAddress generateName is the name", "POST", "/apis/networking.k8s.io/v1/ipaddresses", "", js,
			`{"apiVersion":"networking.k8s.io/v1","kind":"IPAddress","metadata":{"generateName":"10.96.250.9"},"spec":{"parentRef":{"resource":"services","namespace":"rules","name":"x"}}}`, 201,
			func(t *testing.T, b []byte) {
				var ip networkingv1.IPAddress
				decode(t, b, &ip)
				if ip.Name != "10.96.250.9" {
					t.Errorf("name %q", ip.Name)
				}
			}},
		{"ServiceCIDR create", "POST", "/apis/networking.k8s.io/v1/servicecidrs", "", js,
			`{"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR","metadata":{"name":"sc"},"spec":{"cidrs":["10.132.0.0/24"]}}`, 201, nil},
		{"ServiceCIDR status labels", "PATCH", "/apis/networking.k8s.io/v1/servicecidrs/sc/status", "", merge, `{"metadata":{"labels":{"st":"1"}}}`, 200,
			func(t *testing.T, b []byte) {
				var sc networkingv1.ServiceCIDR
				decode(t, b, &sc)
				if sc.Labels["st"] != "" || len(sc.ManagedFields) != 2 || !strings.Contains(string(sc.ManagedFields[1].FieldsV1.Raw), "f:st") {
					t.Errorf("labels %v (the strategy puts them back), managed fields %+v (the status manager owns st)", sc.Labels, sc.ManagedFields)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, st, tc.method, tc.path, tc.query, tc.h, tc.body)
			if r.Code != tc.code {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.path, r.Code, tc.code, r.Body)
			}
			switch tc.name {
			case "PVC create":
				pvcCreateRV = rvOf(t, r.Body)
			case "PVC first update writes":
				pvcFirstRV = rvOf(t, r.Body)
			}
			if tc.check != nil {
				tc.check(t, r.Body)
			}
		})
	}
}

var pvcCreateRV, pvcFirstRV string

func checkDangling(t *testing.T, b []byte, status, reason string) {
	t.Helper()
	var fs flowcontrolv1.FlowSchema
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(fs.Status.Conditions) != 1 || string(fs.Status.Conditions[0].Status) != status || fs.Status.Conditions[0].Reason != reason {
		t.Fatalf("conditions %+v, want Dangling %s %s", fs.Status.Conditions, status, reason)
	}
	found := false
	for _, mf := range fs.ManagedFields {
		found = found || mf.Manager == "api-priority-and-fairness-config-consumer-v1" && mf.Subresource == "status" && mf.Operation == metav1.ManagedFieldsOperationApply
	}
	if len(fs.ManagedFields) != 2 || !found {
		t.Errorf("managed fields %+v: want the controller's apply of the status", fs.ManagedFields)
	}
}
