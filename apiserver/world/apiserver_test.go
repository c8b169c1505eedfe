package world_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/testkit/k8stest"
	"github.com/wtrace/wtrace/testkit/wttest"
)

// compareStep is one request sent to the real apiserver and to a Store
// holding what the apiserver held before the first step.
type compareStep struct {
	name                       string
	method, path, query        string
	contentType, accept, agent string
	body                       string // $RV(name) is replaced by that object's last resourceVersion on each side
	// protobuf sends body (JSON in the step) encoded in protobuf.
	protobuf bool
	// skip lists JSON paths (dotted, [] for every element) whose values
	// may differ (documented approximations).
	skip []string
}

// seedNamespace holds the objects both sides start with.
const seedNamespace = "wcmp"

var seedObjects = []struct{ path, body string }{
	{"/api/v1/namespaces/" + seedNamespace + "/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seed-a","labels":{"app":"a"}},"data":{"k":"1"}}`},
	{"/api/v1/namespaces/" + seedNamespace + "/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seed-b","labels":{"app":"b"},"finalizers":["example.com/hold"]},"data":{"k":"2"}}`},
	{"/api/v1/namespaces/" + seedNamespace + "/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seed-c","labels":{"app":"b"}},"data":{"k":"3"}}`},
	{"/api/v1/namespaces/" + seedNamespace + "/secrets", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"sec"},"type":"Opaque","data":{"p":"cGFzcw=="}}`},
	{"/api/v1/namespaces/" + seedNamespace + "/pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
	{"/apis/apps/v1/namespaces/" + seedNamespace + "/deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"dep","labels":{"app":"d"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`},
}

// widgetCRD is a custom resource definition with a status subresource
// and no schema to speak of, as many controllers' CRDs.
const widgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},
"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

const (
	crs     = "/apis/example.com/v1/namespaces/" + seedNamespace + "/widgets"
	ns      = "/api/v1/namespaces/" + seedNamespace
	apps    = "/apis/apps/v1/namespaces/" + seedNamespace
	jsonCT  = "application/json"
	mergeCT = "application/merge-patch+json"
	jpCT    = "application/json-patch+json"
	smpCT   = "application/strategic-merge-patch+json"
	applyCT = "application/apply-patch+yaml"
	pbAcc   = "application/vnd.kubernetes.protobuf"
	tblAcc  = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)

var compareSteps = []compareStep{
	{name: "get", method: "GET", path: ns + "/configmaps/seed-a"},
	{name: "get absent", method: "GET", path: ns + "/configmaps/nope"},
	{name: "list label selector", method: "GET", path: ns + "/configmaps", query: "labelSelector=app%3Db"},
	{name: "list set selector", method: "GET", path: ns + "/configmaps", query: "labelSelector=app+in+(a,b),app!=b"},
	{name: "list field selector", method: "GET", path: ns + "/configmaps", query: "fieldSelector=metadata.name%3Dseed-c"},
	{name: "list unknown field", method: "GET", path: ns + "/configmaps", query: "fieldSelector=spec.x%3D1"},
	{name: "list secret field", method: "GET", path: ns + "/secrets", query: "fieldSelector=type%3DOpaque"},
	{name: "list secret unknown field", method: "GET", path: ns + "/secrets", query: "fieldSelector=spec.x%3D1"},
	{name: "list bad selector", method: "GET", path: ns + "/configmaps", query: "labelSelector=a+in"},
	{name: "list bad field selector", method: "GET", path: ns + "/configmaps", query: "fieldSelector=a"},
	{name: "create", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"a":"1"}}`},
	{name: "create again", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"a":"1"}}`},
	{name: "create generateName", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"zz-"}}`},
	{name: "create no name", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`},
	{name: "create other namespace", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"other"}}`},
	{name: "create dry run", method: "POST", path: ns + "/configmaps", query: "dryRun=All", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"}}`},
	{name: "get dry run", method: "GET", path: ns + "/configmaps/dry"},
	{name: "create yaml", method: "POST", path: ns + "/configmaps", contentType: "application/yaml", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\ndata:\n  k: v\n"},
	{name: "create bad content type", method: "POST", path: ns + "/configmaps", contentType: "text/plain", body: `{}`},
	{name: "create wrong kind", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"k"}}`},
	{name: "update stale", method: "PUT", path: ns + "/configmaps/c1", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","resourceVersion":"1"},"data":{"a":"2"}}`},
	{name: "update", method: "PUT", path: ns + "/configmaps/c1", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","resourceVersion":"$RV(c1)"},"data":{"a":"2"}}`},
	{name: "update unconditional", method: "PUT", path: ns + "/configmaps/c1", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","labels":{"l":"1"}},"data":{"a":"3"}}`},
	{name: "update same", method: "PUT", path: ns + "/configmaps/c1", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","labels":{"l":"1"}},"data":{"a":"3"}}`},
	{name: "update absent", method: "PUT", path: ns + "/configmaps/absent", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"absent"}}`},
	{name: "update name mismatch", method: "PUT", path: ns + "/configmaps/c1", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c2"}}`},
	{name: "update other manager", method: "PUT", path: ns + "/configmaps/c1", query: "fieldManager=other", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","labels":{"l":"1"}},"data":{"a":"3","b":"4"}}`},
	{name: "merge patch", method: "PATCH", path: ns + "/configmaps/c1", contentType: mergeCT, body: `{"data":{"m":"1"},"metadata":{"annotations":{"x":"y"}}}`},
	{name: "merge patch no-op", method: "PATCH", path: ns + "/configmaps/c1", contentType: mergeCT, body: `{"data":{"m":"1"}}`},
	{name: "merge patch stale", method: "PATCH", path: ns + "/configmaps/c1", contentType: mergeCT, body: `{"metadata":{"resourceVersion":"1"},"data":{"m":"2"}}`},
	{name: "merge patch bad json", method: "PATCH", path: ns + "/configmaps/c1", contentType: mergeCT, body: `{bad`},
	{name: "json patch", method: "PATCH", path: ns + "/configmaps/c1", contentType: jpCT, body: `[{"op":"add","path":"/data/j","value":"1"},{"op":"remove","path":"/data/a"}]`},
	{name: "json patch test fails", method: "PATCH", path: ns + "/configmaps/c1", contentType: jpCT, body: `[{"op":"test","path":"/data/j","value":"2"}]`},
	{name: "json patch bad path", method: "PATCH", path: ns + "/configmaps/c1", contentType: jpCT, body: `[{"op":"remove","path":"/metadata/nothere"}]`},
	{name: "json patch not a list", method: "PATCH", path: ns + "/configmaps/c1", contentType: jpCT, body: `{"op":"add"}`},
	{name: "strategic patch", method: "PATCH", path: ns + "/configmaps/c1", contentType: smpCT, body: `{"metadata":{"finalizers":["example.com/f"]},"data":{"s":"1"}}`},
	{name: "strategic patch bad", method: "PATCH", path: ns + "/configmaps/c1", contentType: smpCT, body: `{bad`},
	{name: "patch absent", method: "PATCH", path: ns + "/configmaps/absent", contentType: mergeCT, body: `{}`},
	{name: "patch bad content type", method: "PATCH", path: ns + "/configmaps/c1", contentType: "text/plain", body: `{}`},
	{name: "apply create", method: "PATCH", path: ns + "/configmaps/sa", query: "fieldManager=mgr-a", contentType: applyCT, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\ndata:\n  k: a\n"},
	{name: "apply conflict", method: "PATCH", path: ns + "/configmaps/sa", query: "fieldManager=mgr-b", contentType: applyCT, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\ndata:\n  k: b\n"},
	{name: "apply force", method: "PATCH", path: ns + "/configmaps/sa", query: "fieldManager=mgr-b&force=true", contentType: applyCT, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\ndata:\n  k: b\n  l: x\n"},
	{name: "apply shared", method: "PATCH", path: ns + "/configmaps/sa", query: "fieldManager=mgr-a", contentType: applyCT, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\n  labels:\n    o: a\ndata:\n  z: a\n"},
	{name: "apply no manager", method: "PATCH", path: ns + "/configmaps/sa", contentType: applyCT, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\n"},
	{name: "force without apply", method: "PATCH", path: ns + "/configmaps/sa", query: "force=true", contentType: mergeCT, body: `{}`},
	{name: "delete with finalizer", method: "DELETE", path: ns + "/configmaps/c1"},
	{name: "delete again", method: "DELETE", path: ns + "/configmaps/c1"},
	{name: "update while deleting", method: "PATCH", path: ns + "/configmaps/c1", contentType: mergeCT, body: `{"data":{"late":"1"}}`},
	{name: "remove finalizer", method: "PATCH", path: ns + "/configmaps/c1", contentType: jpCT, body: `[{"op":"remove","path":"/metadata/finalizers"}]`},
	{name: "get deleted", method: "GET", path: ns + "/configmaps/c1"},
	{name: "patch deleted", method: "PATCH", path: ns + "/configmaps/c1", contentType: mergeCT, body: `{"data":{"x":"1"}}`},
	{name: "delete dry run", method: "DELETE", path: ns + "/configmaps/seed-a", query: "dryRun=All"},
	{name: "get after dry run", method: "GET", path: ns + "/configmaps/seed-a"},
	{name: "delete precondition", method: "DELETE", path: ns + "/configmaps/seed-a", contentType: jsonCT, body: `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`},
	{name: "delete stale precondition", method: "DELETE", path: ns + "/configmaps/seed-a", contentType: jsonCT, body: `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`},
	{name: "delete", method: "DELETE", path: ns + "/configmaps/seed-a"},
	{name: "delete absent", method: "DELETE", path: ns + "/configmaps/seed-a"},
	{name: "delete foreground", method: "DELETE", path: ns + "/configmaps/y1", query: "propagationPolicy=Foreground"},
	{name: "delete bad propagation", method: "DELETE", path: ns + "/configmaps/sa", query: "propagationPolicy=Sideways"},
	{name: "delete collection", method: "DELETE", path: ns + "/configmaps", query: "labelSelector=app%3Db"},
	{name: "list after delete collection", method: "GET", path: ns + "/configmaps"},
	{name: "table pods", method: "GET", path: ns + "/pods", accept: tblAcc},
	{name: "pod status patch keeps owners", method: "PATCH", path: ns + "/pods/pod/status", contentType: mergeCT, body: `{"metadata":{"annotations":{"a":"b"},"labels":{"l":"m"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"seed-c","uid":"00000000-0000-0000-0000-000000000001"}]},"status":{"phase":"Running"}}`},
	{name: "create deployment", method: "POST", path: apps + "/deployments", contentType: jsonCT, body: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"dd"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}],"readinessProbe":{"httpGet":{"port":80}}}],"volumes":[{"name":"v","configMap":{"name":"x"}}]}}}}`},
	{name: "apply replicaset", method: "PATCH", path: apps + "/replicasets/rr", query: "fieldManager=m", contentType: applyCT, body: "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: rr\nspec:\n  selector:\n    matchLabels:\n      a: c\n  template:\n    metadata:\n      labels:\n        a: c\n    spec:\n      containers:\n      - name: c\n        image: nginx:1\n"},
	{name: "apply pod", method: "PATCH", path: ns + "/pods/ap", query: "fieldManager=m", contentType: applyCT, body: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ap\nspec:\n  containers:\n  - name: c\n    image: nginx:1\n",
		skip: []string{"spec.volumes.[].name", "spec.containers.[].volumeMounts.[].name"}},
	{name: "create pod", method: "POST", path: ns + "/pods", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c","image":"nginx:1.27","resources":{"limits":{"cpu":"100m"}}},{"name":"d","image":"busybox","ports":[{"containerPort":80}]}]}}`,
		skip: []string{"metadata.name", "spec.volumes.[].name", "spec.containers.[].volumeMounts.[].name"}},
	{name: "create pod without its service account", method: "POST", path: ns + "/pods", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nosa"},"spec":{"serviceAccountName":"nope","containers":[{"name":"c","image":"nginx"}]}}`},
	{name: "create pod, no token", method: "POST", path: ns + "/pods", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"notoken"},"spec":{"automountServiceAccountToken":false,"priorityClassName":"system-cluster-critical","tolerations":[{"operator":"Exists"}],"containers":[{"name":"c","image":"nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000","resources":{"limits":{"cpu":"1","memory":"1Gi"}}}]}}`},
	// The scheduler's binding (and the deprecated bindings resource).
	{name: "bind", method: "POST", path: ns + "/pods/pod/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"pod","annotations":{"a":"b"}},"target":{"kind":"Node","name":"node-a"}}`},
	{name: "bind again", method: "POST", path: ns + "/pods/pod/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"pod"},"target":{"name":"node-b"}}`},
	{name: "bound pod", method: "GET", path: ns + "/pods/pod"},
	{name: "bind absent", method: "POST", path: ns + "/pods/nope/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"nope"},"target":{"name":"node-a"}}`},
	{name: "bind name mismatch", method: "POST", path: ns + "/pods/pod/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"other"},"target":{"name":"node-a"}}`},
	{name: "bind without target", method: "POST", path: ns + "/pods/notoken/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"notoken"},"target":{"kind":"Pod"}}`},
	{name: "bind stale precondition", method: "POST", path: ns + "/pods/notoken/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"notoken","resourceVersion":"1"},"target":{"name":"node-a"}}`},
	{name: "bind other uid", method: "POST", path: ns + "/pods/notoken/binding", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"notoken","uid":"00000000-0000-0000-0000-000000000000"},"target":{"name":"node-a"}}`},
	{name: "bind dry run", method: "POST", path: ns + "/pods/notoken/binding", query: "dryRun=All", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"notoken"},"target":{"name":"node-a"}}`},
	{name: "bind get", method: "GET", path: ns + "/pods/notoken/binding"},
	{name: "legacy bind", method: "POST", path: ns + "/bindings", contentType: jsonCT, accept: pbAcc, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"notoken","resourceVersion":"1"},"target":{"name":"node-b"}}`},
	{name: "legacy bound pod", method: "GET", path: ns + "/pods/notoken"},
	{name: "legacy bind absent", method: "POST", path: ns + "/bindings", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"nope"},"target":{"name":"node-b"}}`},
	{name: "legacy bind list", method: "GET", path: ns + "/bindings"},
	{name: "delete pod", method: "DELETE", path: ns + "/pods/pod"},
	{name: "status of configmap", method: "GET", path: ns + "/configmaps/sa/status"},
	{name: "scale", method: "GET", path: apps + "/deployments/dep/scale"},
	{name: "scale update", method: "PUT", path: apps + "/deployments/dep/scale", contentType: jsonCT, body: `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"dep","namespace":"wcmp"},"spec":{"replicas":3}}`},
	{name: "scale patch", method: "PATCH", path: apps + "/deployments/dep/scale", contentType: mergeCT, body: `{"spec":{"replicas":4}}`},
	{name: "scale stale", method: "PUT", path: apps + "/deployments/dep/scale", contentType: jsonCT, body: `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"dep","namespace":"wcmp","resourceVersion":"1"},"spec":{"replicas":3}}`},
	{name: "deployment after scale", method: "GET", path: apps + "/deployments/dep"},
	{name: "status patch", method: "PATCH", path: apps + "/deployments/dep/status", contentType: mergeCT, body: `{"status":{"replicas":4,"observedGeneration":3},"spec":{"replicas":9}}`},
	{name: "spec patch ignores status", method: "PATCH", path: apps + "/deployments/dep", contentType: mergeCT, body: `{"status":{"replicas":7},"metadata":{"labels":{"x":"y"}}}`},
	{name: "spec change bumps generation", method: "PATCH", path: apps + "/deployments/dep", contentType: smpCT, body: `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox:2"}]}}}}`},
	{name: "status update", method: "PUT", path: apps + "/deployments/dep/status", contentType: jsonCT, body: "$OBJ(dep)"},
	{name: "status patch keeps annotations, not labels", method: "PATCH", path: apps + "/deployments/dep/status", contentType: mergeCT, body: `{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"1"},"labels":{"z":"1"}},"status":{"replicas":1}}`},
	{name: "table list", method: "GET", path: ns + "/configmaps", accept: tblAcc},
	{name: "table one", method: "GET", path: ns + "/secrets/sec", accept: tblAcc},
	{name: "table deployments", method: "GET", path: apps + "/deployments", accept: tblAcc, query: "includeObject=Object"},
	{name: "table bad option", method: "GET", path: ns + "/configmaps", accept: tblAcc, query: "includeObject=All"},
	{name: "partial list", method: "GET", path: ns + "/configmaps", accept: "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
	{name: "partial one", method: "GET", path: ns + "/configmaps/sa", accept: "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"},
	{name: "partial list of one", method: "GET", path: ns + "/configmaps/sa", accept: "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
	{name: "partial of a list", method: "GET", path: ns + "/configmaps", accept: "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"},
	{name: "partial protobuf", method: "GET", path: ns + "/configmaps", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
	{name: "protobuf get", method: "GET", path: ns + "/configmaps/sa", accept: pbAcc},
	{name: "protobuf list", method: "GET", path: apps + "/deployments", accept: pbAcc},
	{name: "protobuf error", method: "GET", path: ns + "/configmaps/nope", accept: pbAcc},
	{name: "yaml get", method: "GET", path: ns + "/configmaps/sa", accept: "application/yaml"},
	{name: "not acceptable", method: "GET", path: ns + "/configmaps/sa", accept: "text/plain"},
	{name: "protobuf table", method: "GET", path: ns + "/configmaps/sa", accept: "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"},
	{name: "cr get", method: "GET", path: crs + "/w0"},
	{name: "cr create", method: "POST", path: crs, contentType: jsonCT, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1},"status":{"ready":true}}`},
	{name: "cr update without resourceVersion", method: "PUT", path: crs + "/w1", contentType: jsonCT, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":2}}`},
	{name: "cr update", method: "PUT", path: crs + "/w1", contentType: jsonCT, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","resourceVersion":"$RV(w1)"},"spec":{"size":2},"status":{"ready":true}}`},
	{name: "cr merge patch", method: "PATCH", path: crs + "/w1", contentType: mergeCT, body: `{"metadata":{"labels":{"a":"b"}}}`},
	{name: "cr status patch", method: "PATCH", path: crs + "/w1/status", contentType: mergeCT, body: `{"status":{"ready":true},"spec":{"size":9}}`},
	{name: "cr json patch", method: "PATCH", path: crs + "/w1", contentType: jpCT, body: `[{"op":"replace","path":"/spec/size","value":3}]`},
	{name: "cr strategic patch", method: "PATCH", path: crs + "/w1", contentType: smpCT, body: `{"spec":{"size":4}}`},
	{name: "cr apply", method: "PATCH", path: crs + "/w2", query: "fieldManager=mgr", contentType: applyCT, body: "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  size: 5\n"},
	{name: "cr protobuf", method: "GET", path: crs + "/w1", accept: pbAcc},
	{name: "cr protobuf or json", method: "GET", path: crs + "/w1", accept: pbAcc + ",application/json"},
	{name: "cr partial protobuf", method: "GET", path: crs, accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
	{name: "cr list", method: "GET", path: crs},
	{name: "cr delete", method: "DELETE", path: crs + "/w1"},
	{name: "create protobuf body", method: "POST", path: ns + "/configmaps", contentType: pbAcc, accept: pbAcc, protobuf: true, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pbody"},"data":{"a":"b"}}`},
	{name: "delete protobuf options", method: "DELETE", path: ns + "/configmaps/pbody", contentType: pbAcc, accept: pbAcc, protobuf: true, body: `{"apiVersion":"meta.k8s.io/v1","kind":"DeleteOptions","preconditions":{"resourceVersion":"1"}}`},
	{name: "create secret", method: "POST", path: ns + "/secrets", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s2"},"type":"Opaque","stringData":{"u":"v"}}`},
	{name: "create pod protobuf answer", method: "POST", path: ns + "/configmaps", accept: pbAcc, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pb"}}`},
	// A JSON patch that copies an array into itself 30 times (1 KB of
	// patch, 2^30 KB of object): refused by the copy limit.
	{name: "json patch copy bomb", method: "PATCH", path: crs + "/w0", contentType: jpCT, body: copyBomb},
	// Field validation: unknown and duplicate fields.
	{name: "create strict", method: "POST", path: ns + "/configmaps", query: "fieldValidation=Strict", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv1","foo":1},"data":{"a":"b"},"bar":2}`},
	{name: "create warn", method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv2","foo":1},"data":{"a":"b"},"bar":2}`},
	{name: "create ignore", method: "POST", path: ns + "/configmaps", query: "fieldValidation=Ignore", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv3"},"bar":2}`},
	{name: "create duplicate strict", method: "POST", path: ns + "/configmaps", query: "fieldValidation=Strict", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv4"},"data":{"a":"b"},"data":{"c":"d"}}`},
	{name: "create yaml strict", method: "POST", path: ns + "/configmaps", query: "fieldValidation=Strict", contentType: "application/yaml", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fv5\nbar: 1\n"},
	{name: "create bad validation", method: "POST", path: ns + "/configmaps", query: "fieldValidation=Loose", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv6"}}`},
	{name: "update strict", method: "PUT", path: ns + "/configmaps/fv2", query: "fieldValidation=Strict", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv2"},"data":{"a":"b"},"bar":2}`},
	{name: "update warn", method: "PUT", path: ns + "/configmaps/fv2", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv2"},"data":{"a":"c"},"bar":2}`},
	{name: "strategic patch strict", method: "PATCH", path: ns + "/configmaps/fv2", query: "fieldValidation=Strict", contentType: smpCT, body: `{"baz":1,"data":{"x":"y"}}`},
	{name: "strategic patch warn", method: "PATCH", path: ns + "/configmaps/fv2", contentType: smpCT, body: `{"baz":1,"data":{"x":"y"}}`},
	{name: "merge patch warn", method: "PATCH", path: ns + "/configmaps/fv2", contentType: mergeCT, body: `{"baz":1,"data":{"z":"y"}}`},
	// A namespace's life: spec.finalizers change through finalize alone,
	// the first DELETE only starts its termination, finalize ends it.
	{name: "namespace create", method: "POST", path: "/api/v1/namespaces", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"wcmp-life"}}`},
	{name: "namespace update keeps finalizers", method: "PUT", path: nsLife, contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"wcmp-life","labels":{"a":"b"}},"spec":{"finalizers":["x.io/y"]},"status":{"phase":"Terminating"}}`},
	{name: "namespace status", method: "PUT", path: nsLife + "/status", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"wcmp-life"},"spec":{"finalizers":["x.io/y"]},"status":{"phase":"Active","conditions":[{"type":"NamespaceDeletionDiscoveryFailure","status":"False","reason":"ResourcesDiscovered","message":"ok","lastTransitionTime":"2026-11-27T12:00:00Z"}]}}`},
	{name: "namespace status get", method: "GET", path: nsLife + "/status"},
	{name: "namespace delete", method: "DELETE", path: nsLife},
	{name: "create in a terminating namespace", method: "POST", path: nsLife + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}}`},
	{name: "create with generateName in a terminating namespace", method: "POST", path: nsLife + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"late-"}}`},
	{name: "create in a missing namespace", method: "POST", path: "/api/v1/namespaces/wcmp-nope/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`},
	{name: "delete an immortal namespace", method: "DELETE", path: "/api/v1/namespaces/kube-public"},
	{name: "namespace delete again", method: "DELETE", path: nsLife},
	{name: "namespace finalize get", method: "GET", path: nsLife + "/finalize"},
	{name: "namespace finalize", method: "PUT", path: nsLife + "/finalize", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"wcmp-life"},"spec":{"finalizers":[]}}`},
	{name: "namespace gone", method: "GET", path: nsLife},
}

const nsLife = "/api/v1/namespaces/wcmp-life"

// copyBomb is a JSON patch of 32 operations: an array of 1 KB, then 30
// copies of the array into itself.
var copyBomb = func() string {
	ops := []string{`{"op":"add","path":"/spec/items","value":["` + strings.Repeat("x", 1000) + `"]}`}
	for range 30 {
		ops = append(ops, `{"op":"copy","from":"/spec/items","path":"/spec/items/-"}`)
	}
	return "[" + strings.Join(ops, ",") + "]"
}()

// TestAgainstAPIServer sends every compareStep to a real kube-apiserver
// and to a Store loaded from a session holding the apiserver's LISTs of the
// seed objects, and compares the answers: status code, Content-Type and
// body, with uids, resourceVersions (numbered in order of appearance on
// each side), timestamps and ages normalized.
func TestAgainstAPIServer(t *testing.T) {
	c := k8stest.Start(t)
	hdr := http.Header{"Content-Type": {jsonCT}, "User-Agent": {"wtrace-compare/1.0"}}
	if resp, b := c.Do("POST", "/api/v1/namespaces", hdr, []byte(`{"metadata":{"name":"`+seedNamespace+`"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create namespace: %d %s", resp.StatusCode, b)
	}
	if resp, b := c.Do("POST", ns+"/serviceaccounts", hdr, []byte(`{"metadata":{"name":"default"}}`)); resp.StatusCode != 201 {
		t.Fatalf("create service account: %d %s", resp.StatusCode, b)
	}
	for _, o := range seedObjects {
		if resp, b := c.Do("POST", o.path, hdr, []byte(o.body)); resp.StatusCode != 201 {
			t.Fatalf("seed %s: %d %s", o.path, resp.StatusCode, b)
		}
	}
	createCRD(t, c)
	if resp, b := c.Do("POST", crs, hdr, []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w0"},"spec":{"size":0}}`)); resp.StatusCode != 201 {
		t.Fatalf("seed widget: %d %s", resp.StatusCode, b)
	}
	var lists [][2]string
	for _, p := range []string{ns + "/configmaps", ns + "/secrets", ns + "/pods", ns + "/serviceaccounts", apps + "/deployments", crs, "/api/v1/namespaces"} {
		resp, b := c.Do("GET", p, http.Header{"Accept": {jsonCT}}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("LIST %s: %d %s", p, resp.StatusCode, b)
		}
		lists = append(lists, [2]string{p, string(b)})
	}
	path := writeListSession(t, lists)
	f := wttest.OpenSession(t, path)
	st, err := world.Load(f, world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	real, mine := newSide(), newSide()
	for _, s := range compareSteps {
		t.Run(s.name, func(t *testing.T) {
			rb, mb := real.body(s.body), mine.body(s.body)
			if s.protobuf {
				rb, mb = toProtobuf(t, rb), toProtobuf(t, mb)
			}
			h := http.Header{"User-Agent": {"wtrace-compare/1.0"}}
			if s.contentType != "" {
				h.Set("Content-Type", s.contentType)
			}
			if s.accept != "" {
				h.Set("Accept", s.accept)
			}
			resp, gotReal := c.Do(s.method, s.path+"?"+s.query, h, []byte(rb))
			q, _ := url.ParseQuery(s.query)
			r, ok := st.Serve(&world.Request{Method: s.method, Path: s.path, Query: q, Header: h, Body: []byte(mb)})
			if !ok {
				t.Fatalf("the store does not serve %s %s", s.method, s.path)
			}
			if r.Code != resp.StatusCode {
				t.Errorf("status %d; the apiserver answered %d\nmine: %s\nreal: %s", r.Code, resp.StatusCode, r.Body, gotReal)
			}
			var mineWarn []string
			for _, w := range r.Warnings {
				mineWarn = append(mineWarn, world.WarningHeader(w))
			}
			if realWarn := resp.Header.Values("Warning"); !slices.Equal(mineWarn, realWarn) {
				t.Errorf("Warning headers %q; the apiserver's %q", mineWarn, realWarn)
			}
			realCT := resp.Header.Get("Content-Type")
			if r.ContentType != realCT {
				t.Errorf("Content-Type %q; the apiserver's %q", r.ContentType, realCT)
			}
			sameBody(t, real, mine, s.skip, realCT, gotReal, r)
		})
	}
}

// sameBody fails t unless the apiserver's answer (of Content-Type
// realCT) and the store's are the same once each side normalized its own.
func sameBody(t *testing.T, real, mine *side, skip []string, realCT string, gotReal []byte, r *world.Response) {
	t.Helper()
	a, err := real.normalize(realCT, gotReal, skip)
	if err != nil {
		t.Fatalf("apiserver body: %v\n%s", err, gotReal)
	}
	b, err := mine.normalize(r.ContentType, r.Body, skip)
	if err != nil {
		t.Fatalf("store body: %v\n%s", err, r.Body)
	}
	if !reflect.DeepEqual(a, b) {
		ja, _ := json.MarshalIndent(a, "", " ")
		jb, _ := json.MarshalIndent(b, "", " ")
		t.Errorf("bodies differ\nmine: %s\nreal: %s", jb, ja)
	}
}

// toProtobuf encodes a JSON object of a step's body in protobuf.
func toProtobuf(t *testing.T, j string) string {
	t.Helper()
	o, err := codec.FromBody(frame.JSON, []byte(j))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := codec.Decode(o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := codec.Encode(obj, frame.Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	return string(codec.Body(p))
}

// createCRD creates the widgets CRD and waits until it is served.
func createCRD(t *testing.T, c *k8stest.Cluster) {
	t.Helper()
	hdr := http.Header{"Content-Type": {jsonCT}}
	if resp, b := c.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", hdr, []byte(widgetCRD)); resp.StatusCode != 201 {
		t.Fatalf("create CRD: %d %s", resp.StatusCode, b)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, _ := c.Do("GET", crs, nil, nil)
		if resp.StatusCode == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("widgets not served within a minute: %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// side is one of the two servers' view of the steps: the names it gave
// uids and resourceVersions, and each object's last resourceVersion.
type side struct {
	uids, rvs map[string]string
	lastRV    map[string]string
	lastObj   map[string]string
}

func newSide() *side {
	return &side{uids: map[string]string{}, rvs: map[string]string{}, lastRV: map[string]string{}, lastObj: map[string]string{}}
}

var rvRef = regexp.MustCompile(`\$RV\(([a-z0-9-]+)\)`)

func (s *side) body(b string) string {
	b = rvRef.ReplaceAllStringFunc(b, func(m string) string { return s.lastRV[rvRef.FindStringSubmatch(m)[1]] })
	if strings.HasPrefix(b, "$OBJ(") {
		return s.lastObj[strings.TrimSuffix(strings.TrimPrefix(b, "$OBJ("), ")")]
	}
	return b
}

// uuidText finds the uids a message names (a precondition's).
var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

var generated = regexp.MustCompile(`^zz-[a-z0-9]{5}$`)

var ageCell = regexp.MustCompile(`^(\d+[smhdy])+$|^<unknown>$`)

// normalize decodes a body (JSON, YAML or protobuf) into plain values with
// uids and resourceVersions renamed in order of appearance, and times and
// generated names replaced.
func (s *side) normalize(ct string, b []byte, skip []string) (any, error) {
	var v any
	mt, _, _ := strings.Cut(ct, ";")
	switch mt {
	case "application/vnd.kubernetes.protobuf":
		o, err := codec.FromBody(frame.Protobuf, b)
		if err != nil {
			return nil, err
		}
		obj, err := codec.Decode(o)
		if err != nil {
			return nil, err
		}
		enc, err := codec.Encode(obj, frame.JSON)
		if err != nil {
			return nil, err
		}
		b = enc.Raw
	case "application/yaml":
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			return nil, err
		}
		b = j
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if m, ok := v.(map[string]any); ok {
		if md, ok := m["metadata"].(map[string]any); ok {
			if name, ok := md["name"].(string); ok {
				if rv, ok := md["resourceVersion"].(string); ok {
					s.lastRV[name] = rv
				}
				s.lastObj[name] = string(b)
			}
		}
	}
	// A list's resourceVersion is the apiserver's latest, which other
	// writes of the cluster move: only the objects' are compared.
	if m, ok := v.(map[string]any); ok {
		if _, list := m["items"]; list || m["kind"] == "Table" {
			if md, ok := m["metadata"].(map[string]any); ok && md["resourceVersion"] != nil {
				md["resourceVersion"] = "<list-rv>"
			}
		}
	}
	v = s.walk(v, "")
	for _, p := range skip {
		v = drop(v, strings.Split(p, "."))
	}
	return v, nil
}

func (s *side) walk(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // names are given in a fixed order
		for _, k := range keys {
			x[k] = s.walk(x[k], k)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = s.walk(e, key)
		}
		if key == "managedFields" {
			// Sorted by time, then by the order of updates within one
			// second: the two sides' seconds fall differently.
			sort.SliceStable(x, func(i, j int) bool {
				a, _ := json.Marshal(x[i])
				b, _ := json.Marshal(x[j])
				return string(a) < string(b)
			})
		}
		return x
	case string:
		switch key {
		case "uid":
			return rename(s.uids, x, "uid")
		case "resourceVersion":
			if x == "<list-rv>" {
				return x
			}
			return rename(s.rvs, x, "rv")
		case "creationTimestamp", "deletionTimestamp", "time":
			return "<time>"
		case "message":
			x = uuidText.ReplaceAllString(x, "<uuid>")
			return regexp.MustCompile(`\b\d{2,}\b`).ReplaceAllString(x, "<n>")
		}
		if generated.MatchString(x) {
			return "zz-*"
		}
		if ageCell.MatchString(x) {
			return "<age>"
		}
		if _, err := time.Parse(time.RFC3339, x); err == nil {
			return "<time>"
		}
		return x
	}
	return v
}

func rename(m map[string]string, v, prefix string) string {
	if v == "" {
		return ""
	}
	if n, ok := m[v]; ok {
		return n
	}
	n := fmt.Sprintf("<%s%d>", prefix, len(m)+1)
	m[v] = n
	return n
}

// drop removes a dotted path from v ("[]" steps into every element).
func drop(v any, path []string) any {
	if len(path) == 0 {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		if len(path) == 1 {
			delete(x, path[0])
			return x
		}
		if e, ok := x[path[0]]; ok {
			x[path[0]] = drop(e, path[1:])
		}
	case []any:
		if path[0] == "[]" {
			for i := range x {
				x[i] = drop(x[i], path[1:])
			}
		}
	}
	return v
}

// writeListSession writes a session whose exchanges are the given LIST
// responses (path, JSON body), as recorded from the apiserver.
func writeListSession(t *testing.T, lists [][2]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lists.wt")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	w, err := formats.NewWriter(file, formats.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(r formats.Record) {
		t.Helper()
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	must(&formats.Meta{Tool: "wtrace test", Source: "synthetic"})
	at := time.Now().UnixNano()
	for i, l := range lists {
		id := int64(i)
		must(&formats.Conn{ID: uint64(i), Time: at, Client: "127.0.0.1:50000", Server: "127.0.0.1:6443", Proto: "http/1.1"})
		must(&formats.Request{Exchange: id, Conn: uint64(i), Time: at, Method: "GET", Target: l[0], Proto: "HTTP/1.1"})
		must(&formats.End{Exchange: id, Dir: formats.ClientToServer, Time: at})
		must(&formats.Response{Exchange: id, Time: at + 1, Proto: "HTTP/1.1", Status: 200,
			Header: []formats.Header{{Name: "Content-Type", Value: jsonCT}}, Framing: formats.FramingLength})
		must(&formats.Body{Exchange: id, Dir: formats.ServerToClient, Time: at + 2, Data: []byte(l[1])})
		must(&formats.End{Exchange: id, Dir: formats.ServerToClient, Time: at + 3, Status: formats.EndComplete, Size: int64(len(l[1]))})
		at += int64(time.Millisecond)
	}
	must(&formats.Summary{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// watchCase is a watch opened on both sides before the writes of
// TestWatchAgainstAPIServer.
type watchCase struct {
	name, path, query, accept string
}

var watchCases = []watchCase{
	{name: "json from list", path: ns + "/configmaps", query: "allowWatchBookmarks=false"},
	{name: "label selector", path: ns + "/configmaps", query: "labelSelector=app%3Db"},
	{name: "field selector", path: ns + "/configmaps", query: "fieldSelector=metadata.name%3Dw2"},
	{name: "protobuf", path: ns + "/configmaps", accept: pbAcc},
	{name: "partial protobuf", path: ns + "/configmaps", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"},
	{name: "table", path: ns + "/configmaps", accept: tblAcc},
	{name: "streaming list", path: ns + "/configmaps", query: "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=app%3Db", accept: jsonCT},
}

// watchWrites change configmaps so that objects enter and leave the
// watches' scopes.
var watchWrites = []compareStep{
	{method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w1","labels":{"app":"b"}}}`},
	{method: "POST", path: ns + "/configmaps", contentType: jsonCT, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w2"}}`},
	{method: "PATCH", path: ns + "/configmaps/w2", contentType: mergeCT, body: `{"metadata":{"labels":{"app":"b"}}}`},
	{method: "PATCH", path: ns + "/configmaps/w1", contentType: mergeCT, body: `{"metadata":{"labels":{"app":"c"}}}`},
	{method: "PATCH", path: ns + "/configmaps/w2", contentType: mergeCT, body: `{"data":{"x":"1"}}`},
	{method: "DELETE", path: ns + "/configmaps/w2"},
	{method: "DELETE", path: ns + "/configmaps/seed-c"},
}

// TestWatchAgainstAPIServer opens the same watches on a real kube-apiserver
// and on a Store loaded from its LISTs, makes the same writes on both, and
// compares the events each watch saw, normalized as TestAgainstAPIServer
// normalizes bodies.
func TestWatchAgainstAPIServer(t *testing.T) {
	c := k8stest.Start(t)
	hdr := http.Header{"Content-Type": {jsonCT}, "User-Agent": {"wtrace-compare/1.0"}}
	for _, p := range []struct{ path, body string }{
		{"/api/v1/namespaces", `{"metadata":{"name":"` + seedNamespace + `"}}`},
		seedObjects[0], seedObjects[1], seedObjects[2],
	} {
		if resp, b := c.Do("POST", p.path, hdr, []byte(p.body)); resp.StatusCode != 201 {
			t.Fatalf("seed %s: %d %s", p.path, resp.StatusCode, b)
		}
	}
	resp, list := c.Do("GET", ns+"/configmaps", http.Header{"Accept": {jsonCT}}, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("LIST: %d %s", resp.StatusCode, list)
	}
	var lm struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(list, &lm); err != nil {
		t.Fatal(err)
	}
	f := wttest.OpenSession(t, writeListSession(t, [][2]string{{ns + "/configmaps", string(list)}}))
	st, err := world.Load(f, world.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type opened struct {
		real chan []watchEv
		mine *world.Watch
		ct   string
	}
	var ws []opened
	for _, wc := range watchCases {
		q := wc.query
		if !strings.Contains(q, "sendInitialEvents") {
			q += "&resourceVersion=" + lm.Metadata.ResourceVersion
		}
		h := http.Header{"User-Agent": {"wtrace-compare/1.0"}}
		if wc.accept != "" {
			h.Set("Accept", wc.accept)
		}
		o := opened{real: make(chan []watchEv, 1)}
		go func(path string) { o.real <- readWatch(t, c, path, h) }(wc.path + "?watch=true&timeoutSeconds=10&" + q) // room for the writes on a loaded machine
		qq, _ := url.ParseQuery(q)
		qq.Set("watch", "true")
		w, refused := st.Watch(&world.Request{Method: "GET", Path: wc.path, Query: qq, Header: h})
		if refused != nil || w == nil {
			t.Fatalf("%s: the store refused the watch: %+v", wc.name, refused)
		}
		o.mine, o.ct = w, w.ContentType()
		ws = append(ws, o)
	}
	time.Sleep(500 * time.Millisecond) // the apiserver's watches are established
	real, mine := newSide(), newSide()
	for _, s := range watchWrites {
		h := http.Header{"User-Agent": {"wtrace-compare/1.0"}, "Content-Type": {s.contentType}}
		if resp, b := c.Do(s.method, s.path, h, []byte(s.body)); resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, resp.StatusCode, b)
		}
		if r, ok := st.Serve(&world.Request{Method: s.method, Path: s.path, Query: url.Values{}, Header: h, Body: []byte(s.body)}); !ok || r.Code >= 300 {
			t.Fatalf("store: %s %s: %+v", s.method, s.path, r)
		}
	}
	for i, o := range ws {
		wc := watchCases[i]
		var got []watchEv
		for _, b := range o.mine.Initial() {
			got = append(got, splitEvents(t, o.ct, b)...)
		}
		for _, b := range takeAll(t, o.mine) {
			got = append(got, splitEvents(t, o.ct, b)...)
		}
		var want []watchEv
		select {
		case want = <-o.real:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the apiserver's watch did not end", wc.name)
		}
		a, b := real.events(t, want), mine.events(t, got)
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.MarshalIndent(a, "", " ")
			jb, _ := json.MarshalIndent(b, "", " ")
			t.Errorf("%s: events differ\nmine: %s\nreal: %s", wc.name, jb, ja)
		}
	}
}

// watchEv is one event as a client decodes it: its type and object body
// with the object's Content-Type.
type watchEv struct {
	typ string
	ct  string
	obj []byte
}

// readWatch reads a watch of the real apiserver to its end.
func readWatch(t *testing.T, c *k8stest.Cluster, path string, h http.Header) []watchEv {
	req, _ := http.NewRequest("GET", c.URL+path, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+k8stest.Token)
	resp, err := c.Client.Do(req)
	if err != nil {
		t.Errorf("watch %s: %v", path, err)
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("watch %s: %d %s", path, resp.StatusCode, b)
	}
	return splitEvents(t, resp.Header.Get("Content-Type"), b)
}

// splitEvents splits a watch body (JSON lines, or length-prefixed
// protobuf) into its events.
func splitEvents(t *testing.T, ct string, b []byte) []watchEv {
	f := frame.FormatOf(ct, true)
	sp := frame.NewSplitter(f, frame.Options{})
	var out []watchEv
	for len(b) > 0 {
		n, ev, ok, err := sp.Next(b)
		b = b[n:]
		if err != nil {
			t.Fatalf("splitting a %s watch: %v", ct, err)
		}
		if !ok {
			continue
		}
		m, err := frame.Peek(f, ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		av, kind, obj, err := frame.EventObject(f, ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		o := codec.Object{Format: f, APIVersion: av, Kind: kind, Raw: append([]byte(nil), obj...)}
		out = append(out, watchEv{typ: m.Type, ct: ct, obj: codec.Body(o)})
	}
	return out
}

func (s *side) events(t *testing.T, evs []watchEv) []any {
	var out []any
	for _, e := range evs {
		if e.typ == "BOOKMARK" && !bytes.Contains(e.obj, []byte("initial-events-end")) {
			continue // the apiserver's periodic bookmarks depend on timing
		}
		mt := "application/json"
		if frame.FormatOf(e.ct, true) == frame.Protobuf {
			mt = "application/vnd.kubernetes.protobuf"
		}
		if e.typ == "BOOKMARK" {
			// The initial-events-end bookmark carries the storage's
			// revision when the list was served, which any other writer
			// (the apiserver's own leases and events) may have moved past
			// the listed objects' at any moment: its presence and place
			// are compared, not its number (normalized on a side of its
			// own, so it takes no name from this stream's numbering).
			v, err := newSide().normalize(mt, e.obj, nil)
			if err != nil {
				t.Fatalf("%s event: %v", e.typ, err)
			}
			if m, ok := v.(map[string]any); ok {
				if md, ok := m["metadata"].(map[string]any); ok {
					md["resourceVersion"] = "<the storage's revision>"
				}
			}
			out = append(out, map[string]any{"type": e.typ, "object": v})
			continue
		}
		v, err := s.normalize(mt, e.obj, nil)
		if err != nil {
			t.Fatalf("%s event: %v", e.typ, err)
		}
		out = append(out, map[string]any{"type": e.typ, "object": v})
	}
	return out
}
