package world_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/testkit/wttest"
)

const (
	crdsPath        = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	apiServicesPath = "/apis/apiregistration.k8s.io/v1/apiservices"
)

// serverKindsStore is a world that has listed (empty) CRDs and
// APIServices.
func serverKindsStore(t *testing.T) *world.Store {
	t.Helper()
	f := wttest.OpenSession(t, writeListSession(t, [][2]string{
		{crdsPath, `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{"resourceVersion":"10"},"items":[]}`},
		{apiServicesPath, `{"kind":"APIServiceList","apiVersion":"apiregistration.k8s.io/v1","metadata":{"resourceVersion":"11"},"items":[]}`},
	}))
	st, err := world.Load(f, world.Options{Now: func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func crdBody(name, group, plural, kind string) string {
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"` + name + `"},` +
		`"spec":{"group":"` + group + `","scope":"Namespaced","names":{"plural":"` + plural + `","kind":"` + kind + `"},` +
		`"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// TestCRDCreate: a CRD's create answers it as the registry made it (its
// defaults, status with the stored version and no condition), then the
// naming and establishing controllers write its status (accepted names,
// NamesAccepted, Established: two versions, as kube-apiserver's
// controllers' two writes); a name that is not plural.group is refused,
// and a second CRD of the group that asks for a taken plural is not
// accepted (nor established).
func TestCRDCreate(t *testing.T) {
	st := serverKindsStore(t)
	tests := []struct {
		name, body  string
		code        int
		accepted    metav1.ConditionStatus // "" for a refused create
		reason      string
		established bool
		message     string // of a refused create
	}{
		{name: "established", body: crdBody("widgets.example.com", "example.com", "widgets", "Widget"),
			code: http.StatusCreated, accepted: "True", reason: "NoConflicts", established: true},
		{name: "name not plural.group", body: crdBody("gadget.example.com", "example.com", "gadgets", "Gadget"),
			code: http.StatusUnprocessableEntity, message: `metadata.name: Invalid value: "gadget.example.com": must be spec.names.plural+"."+spec.group`},
		{name: "plural taken", body: crdBody("widgets.example.com", "example.com", "widgets", "Widget"), code: http.StatusConflict},
		// Its kind and list kind are taken: the last conflict checked names
		// the reason, as the naming controller's.
		{name: "kind taken", body: crdBody("others.example.com", "example.com", "others", "Widget"),
			code: http.StatusCreated, accepted: "False", reason: "ListKindConflict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, st, "POST", crdsPath, "", jsonHeader(), tt.body)
			if resp.Code != tt.code {
				t.Fatalf("create: %d, want %d: %s", resp.Code, tt.code, resp.Body)
			}
			if tt.message != "" && !strings.Contains(string(resp.Body), jsonEscape(tt.message)) {
				t.Errorf("create: %s, want the message %s", resp.Body, tt.message)
			}
			if tt.accepted == "" {
				return
			}
			var created apiextensionsv1.CustomResourceDefinition
			if err := json.Unmarshal(resp.Body, &created); err != nil {
				t.Fatal(err)
			}
			if created.Spec.Conversion == nil || created.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter ||
				created.Spec.Names.ListKind != created.Spec.Names.Kind+"List" || created.Generation != 1 {
				t.Errorf("created without the registry's defaults: %+v", created.Spec)
			}
			if len(created.Status.Conditions) != 0 || len(created.Status.StoredVersions) != 1 {
				t.Errorf("created with status %+v, want no condition and the stored version", created.Status)
			}
			get := do(t, st, "GET", crdsPath+"/"+created.Name, "", nil, "")
			var crd apiextensionsv1.CustomResourceDefinition
			if err := json.Unmarshal(get.Body, &crd); err != nil {
				t.Fatal(err)
			}
			if rv(t, crd.ResourceVersion)-rv(t, created.ResourceVersion) != 2 && tt.established {
				t.Errorf("resourceVersion %s after %s: want the controllers' two writes", crd.ResourceVersion, created.ResourceVersion)
			}
			cond := func(typ apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
				for i := range crd.Status.Conditions {
					if crd.Status.Conditions[i].Type == typ {
						return &crd.Status.Conditions[i]
					}
				}
				return nil
			}
			na, est := cond(apiextensionsv1.NamesAccepted), cond(apiextensionsv1.Established)
			if na == nil || string(na.Status) != string(tt.accepted) || na.Reason != tt.reason {
				t.Errorf("NamesAccepted %+v, want %s %s", na, tt.accepted, tt.reason)
			}
			if got := est != nil && est.Status == apiextensionsv1.ConditionTrue; got != tt.established {
				t.Errorf("Established %+v, want established %v", est, tt.established)
			}
			if tt.established && crd.Status.AcceptedNames.Plural != crd.Spec.Names.Plural {
				t.Errorf("accepted names %+v", crd.Status.AcceptedNames)
			}
			mf := crd.ManagedFields
			if len(mf) != 2 || mf[1].Manager != "kube-apiserver" || mf[1].Subresource != "status" {
				t.Errorf("managedFields %+v, want the client's and kube-apiserver's status entry", mf)
			}
		})
	}
}

// TestCRDDelete: the first DELETE of a CRD answers it with its
// deletionTimestamp, the cleanup finalizer and Terminating; the finalizer
// controller then deletes it.
func TestCRDDelete(t *testing.T) {
	st := serverKindsStore(t)
	if r := do(t, st, "POST", crdsPath, "", jsonHeader(), crdBody("widgets.example.com", "example.com", "widgets", "Widget")); r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	resp := do(t, st, "DELETE", crdsPath+"/widgets.example.com", "propagationPolicy=Foreground", nil, "")
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(resp.Body, &crd); resp.Code != http.StatusOK || err != nil {
		t.Fatalf("delete: %d %s", resp.Code, resp.Body)
	}
	if crd.DeletionTimestamp == nil || len(crd.Finalizers) != 1 || crd.Finalizers[0] != "customresourcecleanup.apiextensions.k8s.io" {
		t.Errorf("delete answered %+v, want the deletionTimestamp and the cleanup finalizer alone", crd.ObjectMeta)
	}
	if c := crd.Status.Conditions[len(crd.Status.Conditions)-1]; c.Type != apiextensionsv1.Terminating || c.Reason != "InstanceDeletionPending" {
		t.Errorf("last condition %+v, want Terminating InstanceDeletionPending", c)
	}
	if r := do(t, st, "GET", crdsPath+"/widgets.example.com", "", nil, ""); r.Code != http.StatusNotFound {
		t.Errorf("GET after the delete: %d, want 404 (the finalizer controller is done)", r.Code)
	}
}

// TestAPIServiceCreate: a local APIService is created Available (Local),
// one with a service has no condition (the available controller is not
// modelled), neither has a generation; a name that is not
// version.group is refused.
func TestAPIServiceCreate(t *testing.T) {
	st := serverKindsStore(t)
	body := func(name, group, service string) string {
		return `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"` + name + `"},` +
			`"spec":{"group":"` + group + `","version":"v1","groupPriorityMinimum":1000,"versionPriority":15` + service + `}}`
	}
	tests := []struct {
		name, body string
		code       int
		available  string
		message    string
	}{
		{name: "local", body: body("v1.local.example.com", "local.example.com", ""), code: http.StatusCreated, available: "True"},
		{name: "service", body: body("v1.svc.example.com", "svc.example.com", `,"service":{"namespace":"ns","name":"svc"}`), code: http.StatusCreated},
		{name: "bad name", body: body("v2.local.example.com", "bad.example.com", ""), code: http.StatusUnprocessableEntity,
			message: "must be `spec.version+\".\"+spec.group`: \"v1.bad.example.com\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, st, "POST", apiServicesPath, "", jsonHeader(), tt.body)
			if resp.Code != tt.code {
				t.Fatalf("create: %d, want %d: %s", resp.Code, tt.code, resp.Body)
			}
			if tt.message != "" {
				if !strings.Contains(string(resp.Body), jsonEscape(tt.message)) {
					t.Errorf("create: %s, want the message %s", resp.Body, tt.message)
				}
				return
			}
			var as apiregistrationv1.APIService
			if err := json.Unmarshal(resp.Body, &as); err != nil {
				t.Fatal(err)
			}
			if as.Generation != 0 {
				t.Errorf("generation %d, want none", as.Generation)
			}
			got := ""
			for _, c := range as.Status.Conditions {
				if c.Type == apiregistrationv1.Available {
					got = string(c.Status)
					if c.Reason != "Local" || c.Message != "Local APIServices are always available" {
						t.Errorf("Available %+v", c)
					}
				}
			}
			if got != tt.available {
				t.Errorf("Available %q, want %q", got, tt.available)
			}
			for _, e := range as.ManagedFields {
				if strings.Contains(string(e.FieldsV1.Raw), "f:status") {
					t.Errorf("managedFields count the status as %s's", e.Manager)
				}
			}
		})
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

func rv(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("resourceVersion %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestServedExtensions: /apis' groups of the world's objects — the
// aggregator's legacy list has the APIServices' groups (a CRD's
// registered one among them: priority 1000, after a group of higher
// priority), the aggregated discovery the established CRD's resource.
func TestServedExtensions(t *testing.T) {
	st := serverKindsStore(t)
	if r := do(t, st, "POST", crdsPath, "", jsonHeader(), crdBody("widgets.example.com", "example.com", "widgets", "Widget")); r.Code != http.StatusCreated {
		t.Fatalf("create CRD: %d %s", r.Code, r.Body)
	}
	as := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.high.example.org"},` +
		`"spec":{"group":"high.example.org","version":"v1","groupPriorityMinimum":2000,"versionPriority":15}}`
	if r := do(t, st, "POST", apiServicesPath, "", jsonHeader(), as); r.Code != http.StatusCreated {
		t.Fatalf("create APIService: %d %s", r.Code, r.Body)
	}
	legacy, aggregated := st.ServedExtensions()
	var names []string
	for _, g := range legacy {
		names = append(names, g.Name+" "+g.PreferredVersion.GroupVersion)
	}
	if want := []string{"high.example.org high.example.org/v1", "example.com example.com/v1"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("legacy groups %q, want %q", names, want)
	}
	if len(aggregated) != 1 || aggregated[0].Name != "example.com" || len(aggregated[0].Versions) != 1 {
		t.Fatalf("aggregated %+v, want example.com's v1", aggregated)
	}
	r := aggregated[0].Versions[0].Resources
	if len(r) != 1 || r[0].Resource != "widgets" || r[0].SingularResource != "widget" || r[0].ResponseKind.Kind != "Widget" || r[0].Scope != "Namespaced" {
		t.Errorf("aggregated resources %+v", r)
	}
}

// TestServerKindUpdate: a CRD's plural (which names it) cannot change;
// an APIService is validated on update as on create.
func TestServerKindUpdate(t *testing.T) {
	st := serverKindsStore(t)
	if r := do(t, st, "POST", crdsPath, "", jsonHeader(), crdBody("widgets.example.com", "example.com", "widgets", "Widget")); r.Code != http.StatusCreated {
		t.Fatalf("create CRD: %d %s", r.Code, r.Body)
	}
	as := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.a.example.org"},` +
		`"spec":{"group":"a.example.org","version":"v1","groupPriorityMinimum":2000,"versionPriority":15}}`
	if r := do(t, st, "POST", apiServicesPath, "", jsonHeader(), as); r.Code != http.StatusCreated {
		t.Fatalf("create APIService: %d %s", r.Code, r.Body)
	}
	merge := http.Header{"Content-Type": {"application/merge-patch+json"}}
	tests := []struct {
		name, path, patch string
		code              int
		message           string
	}{
		{"CRD plural", crdsPath + "/widgets.example.com", `{"spec":{"names":{"plural":"gadgets"}}}`, http.StatusUnprocessableEntity,
			`CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: spec.names.plural: Invalid value: "gadgets": field is immutable`},
		{"CRD label", crdsPath + "/widgets.example.com", `{"metadata":{"labels":{"a":"1"}}}`, http.StatusOK, ""},
		{"APIService priority", apiServicesPath + "/v1.a.example.org", `{"spec":{"versionPriority":0}}`, http.StatusUnprocessableEntity,
			`spec.versionPriority: Invalid value: 0: must be positive and less than 1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, st, "PATCH", tt.path, "", merge, tt.patch)
			if r.Code != tt.code || !strings.Contains(string(r.Body), jsonEscape(tt.message)) {
				t.Errorf("patch: %d %s, want %d with %s", r.Code, r.Body, tt.code, tt.message)
			}
		})
	}
}

// TestCRDDeleteInstances: deleting an established CRD deletes its custom
// resources; one with finalizers of its own only gets its
// deletionTimestamp, and the CRD waits for it (Terminating,
// InstanceDeletionInProgress).
func TestCRDDeleteInstances(t *testing.T) {
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com","uid":"u1","resourceVersion":"5","creationTimestamp":"2026-11-22T09:00:00Z","generation":1},` +
		`"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},` +
		`"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]},` +
		`"status":{"acceptedNames":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},"storedVersions":["v1"],` +
		`"conditions":[{"type":"NamesAccepted","status":"True","reason":"NoConflicts","message":"no conflicts found","lastTransitionTime":"2026-11-22T09:00:00Z"},` +
		`{"type":"Established","status":"True","reason":"InitialNamesAccepted","message":"the initial names have been accepted","lastTransitionTime":"2026-11-22T09:00:00Z"}]}}`
	widget := func(name, rv, fins string) string {
		return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"` + name + `","namespace":"ns","uid":"w-` + name + `","resourceVersion":"` + rv + `"` + fins + `}}`
	}
	f := wttest.OpenSession(t, writeListSession(t, [][2]string{
		{crdsPath, `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{"resourceVersion":"10"},"items":[` + crd + `]}`},
		{"/apis/example.com/v1/namespaces/ns/widgets", `{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"10"},"items":[` +
			widget("free", "6", "") + `,` + widget("held", "7", `,"finalizers":["example.com/hold"]`) + `]}`},
	}))
	st, err := world.Load(f, world.Options{Now: func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if r := do(t, st, "DELETE", crdsPath+"/widgets.example.com", "", nil, ""); r.Code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Code, r.Body)
	}
	if r := do(t, st, "GET", "/apis/example.com/v1/namespaces/ns/widgets/free", "", nil, ""); r.Code != http.StatusNotFound {
		t.Errorf("GET of the widget without finalizers: %d, want 404", r.Code)
	}
	r := do(t, st, "GET", "/apis/example.com/v1/namespaces/ns/widgets/held", "", nil, "")
	if r.Code != http.StatusOK || !strings.Contains(string(r.Body), `"deletionTimestamp"`) {
		t.Errorf("GET of the widget with finalizers: %d %s, want it being deleted", r.Code, r.Body)
	}
	r = do(t, st, "GET", crdsPath+"/widgets.example.com", "", nil, "")
	if r.Code != http.StatusOK || !strings.Contains(string(r.Body), `"InstanceDeletionInProgress"`) {
		t.Errorf("GET of the CRD: %d %s, want it waiting (InstanceDeletionInProgress)", r.Code, r.Body)
	}
}
