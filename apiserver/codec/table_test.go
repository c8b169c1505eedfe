package codec_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// TestTableRows: the columns and cells of a few kinds' printers (ported
// from kube-apiserver v1.33's), a list printer's order (FlowSchemas by
// precedence) and APIService (a kind of kube-aggregator's).
func TestTableRows(t *testing.T) {
	const created = "2026-11-21T12:00:00Z"
	now := func() time.Time { return time.Date(2026, 11, 21, 12, 10, 0, 0, time.UTC) }
	meta := func(name string, extra string) string {
		return `"metadata":{"name":"` + name + `","creationTimestamp":"` + created + `"` + extra + `}`
	}
	tests := []struct {
		name       string
		apiVersion string
		kind       string
		items      []string
		columns    []string
		cells      [][]any
	}{
		{
			name: "node", apiVersion: "v1", kind: "Node",
			items: []string{`{` + meta("n1", `,"labels":{"node-role.kubernetes.io/control-plane":"","kubernetes.io/role":"edge"}`) +
				`,"spec":{"unschedulable":true},"status":{"conditions":[{"type":"Ready","status":"True"}],` +
				`"addresses":[{"type":"InternalIP","address":"10.0.0.1"}],"nodeInfo":{"kubeletVersion":"v1.33.13","osImage":"Debian"}}}`},
			columns: []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"},
			cells:   [][]any{{"n1", "Ready,SchedulingDisabled", "control-plane,edge", "10m", "v1.33.13", "10.0.0.1", "<none>", "Debian", "<unknown>", "<unknown>"}},
		},
		{
			name: "resource quota", apiVersion: "v1", kind: "ResourceQuota",
			items:   []string{`{` + meta("q", "") + `,"status":{"hard":{"pods":"10","limits.cpu":"2","requests.memory":"1Gi"},"used":{"pods":"3"}}}`},
			columns: []string{"Name", "Request", "Limit", "Age"},
			cells:   [][]any{{"q", "pods: 3/10, requests.memory: 0/1Gi", "limits.cpu: 0/2", "10m"}},
		},
		{
			name: "job", apiVersion: "batch/v1", kind: "Job",
			items: []string{`{` + meta("j", "") + `,"spec":{"parallelism":3,"selector":{"matchLabels":{"a":"b"}},` +
				`"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}},` +
				`"status":{"succeeded":2,"startTime":"2026-11-21T12:01:00Z","completionTime":"2026-11-21T12:03:30Z",` +
				`"conditions":[{"type":"Complete","status":"True"}]}}`},
			columns: []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"},
			cells:   [][]any{{"j", "Complete", "2/1 of 3", "2m30s", "10m", "c", "busybox", "a=b"}},
		},
		{
			name: "hpa v1", apiVersion: "autoscaling/v1", kind: "HorizontalPodAutoscaler",
			items: []string{`{` + meta("h", "") + `,"spec":{"scaleTargetRef":{"kind":"Deployment","name":"d"},"maxReplicas":5,` +
				`"targetCPUUtilizationPercentage":80},"status":{"currentReplicas":2,"currentCPUUtilizationPercentage":50}}`},
			columns: []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"},
			cells:   [][]any{{"h", "Deployment/d", "cpu: 50%/80%", "<unset>", float64(5), float64(2), "10m"}},
		},
		{
			name: "endpoint slice", apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice",
			items: []string{`{` + meta("s", "") + `,"addressType":"IPv4","ports":[{"port":80},{"name":"x"}],` +
				`"endpoints":[{"addresses":["10.0.0.1","10.0.0.2"]},{"addresses":["10.0.0.3","10.0.0.4"]}]}`},
			columns: []string{"Name", "AddressType", "Ports", "Endpoints", "Age"},
			cells:   [][]any{{"s", "IPv4", "80,x", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "10m"}},
		},
		{
			name: "flow schemas by precedence", apiVersion: "flowcontrol.apiserver.k8s.io/v1", kind: "FlowSchema",
			items: []string{
				`{` + meta("b", "") + `,"spec":{"priorityLevelConfiguration":{"name":"global-default"},"matchingPrecedence":500}}`,
				`{` + meta("z", "") + `,"spec":{"priorityLevelConfiguration":{"name":"exempt"},"matchingPrecedence":100,` +
					`"distinguisherMethod":{"type":"ByUser"}},"status":{"conditions":[{"type":"Dangling","status":"False"}]}}`,
				`{` + meta("a", "") + `,"spec":{"priorityLevelConfiguration":{"name":"global-default"},"matchingPrecedence":500}}`},
			columns: []string{"Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL"},
			cells: [][]any{
				{"z", "exempt", float64(100), "ByUser", "10m", "False"},
				{"a", "global-default", float64(500), "<none>", "10m", "?"},
				{"b", "global-default", float64(500), "<none>", "10m", "?"}},
		},
		{
			name: "role binding", apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding",
			items: []string{`{` + meta("rb", "") + `,"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},` +
				`"subjects":[{"kind":"User","name":"u1"},{"kind":"User","name":"u2"},{"kind":"ServiceAccount","name":"sa","namespace":"ns"}]}`},
			columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
			cells:   [][]any{{"rb", "ClusterRole/view", "10m", "u1, u2", "", "ns/sa"}},
		},
		{
			name: "storage class", apiVersion: "storage.k8s.io/v1", kind: "StorageClass",
			items: []string{`{` + meta("standard", `,"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}`) +
				`,"provisioner":"example.com/p","volumeBindingMode":"WaitForFirstConsumer"}`},
			columns: []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"},
			cells:   [][]any{{"standard (default)", "example.com/p", "Delete", "WaitForFirstConsumer", false, "10m"}},
		},
		{
			name: "ip address", apiVersion: "networking.k8s.io/v1", kind: "IPAddress",
			items: []string{`{` + meta("10.96.0.10", "") + `,"spec":{"parentRef":{"resource":"services","namespace":"kube-system","name":"dns"}}}`},
			// Two columns, three cells: as the apiserver's.
			columns: []string{"Name", "ParentRef"},
			cells:   [][]any{{"10.96.0.10", "services/kube-system/dns", "10m"}},
		},
		{
			name: "events.k8s.io", apiVersion: "events.k8s.io/v1", kind: "Event",
			items: []string{`{` + meta("e", "") + `,"eventTime":"2026-11-21T12:05:00.000000Z","reportingController":"kubelet",` +
				`"reportingInstance":"n1","reason":"Pulled","regarding":{"kind":"Pod","name":"p","fieldPath":"spec.containers{c}"},` +
				`"note":" pulled ","type":"Normal"}`},
			columns: []string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			cells:   [][]any{{"5m", "Normal", "Pulled", "pod/p", "spec.containers{c}", "kubelet, n1", "pulled", "5m", float64(1), "e"}},
		},
		{
			name: "apiservice", apiVersion: "apiregistration.k8s.io/v1", kind: "APIService",
			items: []string{
				`{` + meta("v1.", "") + `,"spec":{"version":"v1"},"status":{"conditions":[{"type":"Available","status":"True","reason":"Local"}]}}`,
				`{` + meta("v1.example.com", "") + `,"spec":{"group":"example.com","version":"v1","service":{"namespace":"ns","name":"svc"}},` +
					`"status":{"conditions":[{"type":"Available","status":"False","reason":"MissingEndpoints"}]}}`},
			columns: []string{"Name", "Service", "Available", "Age"},
			cells: [][]any{
				{"v1.", "Local", "True", "10m"},
				{"v1.example.com", "ns/svc", "False (MissingEndpoints)", "10m"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gvk := schema.FromAPIVersionAndKind(tt.apiVersion, tt.kind)
			m, err := codec.Negotiate("application/json;as=Table;v=v1;g=meta.k8s.io", codec.TargetList, gvk)
			if err != nil {
				t.Fatal(err)
			}
			items := make([]codec.Object, len(tt.items))
			for i, raw := range tt.items {
				items[i] = codec.Object{Format: frame.JSON, APIVersion: tt.apiVersion, Kind: tt.kind,
					Raw: []byte(`{"apiVersion":"` + tt.apiVersion + `","kind":"` + tt.kind + `",` + strings.TrimPrefix(raw, "{"))}
			}
			b, err := codec.NewWriter(m, codec.TableOptions{IncludeObject: "None"}, now).List(tt.apiVersion, tt.kind, codec.ListMeta{}, items)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var tbl metav1.Table
			if err := json.Unmarshal(b, &tbl); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			var columns []string
			for _, c := range tbl.ColumnDefinitions {
				columns = append(columns, c.Name)
			}
			if !reflect.DeepEqual(columns, tt.columns) {
				t.Errorf("columns = %q; want %q", columns, tt.columns)
			}
			var cells [][]any
			for _, r := range tbl.Rows {
				cells = append(cells, r.Cells)
			}
			if !reflect.DeepEqual(cells, tt.cells) {
				t.Errorf("cells = %#v; want %#v", cells, tt.cells)
			}
		})
	}
}
