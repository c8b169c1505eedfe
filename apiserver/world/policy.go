package world

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// policy is how the apiserver's registry treats one resource's writes
// (its strategy and store options in k8s.io/kubernetes/pkg/registry, v1.33).
type policy struct {
	createOnUpdate      bool // PUT of an absent object creates it
	unconditionalUpdate bool // PUT without a resourceVersion is allowed
	returnDeleted       bool // DELETE answers with the object, not a Status
	generation          bool // metadata.generation: 1 on create, +1 when anything but metadata and status changes
	status              bool // has a status subresource: PUT of the object keeps the old status, /status only changes status
	scale               bool // has a scale subresource
	gcUnsupported       bool // no garbage-collector finalizers on delete
	orphanDefault       bool // a delete without a propagation policy orphans the dependents (DefaultGarbageCollectionPolicy)
	builtin             bool
	resource            string // the resource's plural name
}

var (
	createOnUpdate = map[string]bool{
		"leases": true, "leasecandidates": true, "endpoints": true, "events": true, "limitranges": true,
		"services": true, "runtimeclasses": true, "clusterroles": true, "clusterrolebindings": true,
		"roles": true, "rolebindings": true,
	}
	conditionalUpdate = map[string]bool{
		"clustertrustbundles": true, "runtimeclasses": true, "storageversionmigrations": true,
		"poddisruptionbudgets": true, "storageversions": true, "csidrivers": true, "csistoragecapacities": true,
		"volumeattachments": true, "csinodes": true, "leases": true, "leasecandidates": true,
		"validatingadmissionpolicies": true, "mutatingadmissionpolicies": true,
		"mutatingwebhookconfigurations": true, "validatingwebhookconfigurations": true,
		"mutatingadmissionpolicybindings": true, "validatingadmissionpolicybindings": true,
		"customresourcedefinitions": true, "apiservices": true,
	}
	returnDeleted = map[string]bool{
		"resourceclaimtemplates": true, "resourceslices": true, "resourceclaims": true, "deviceclasses": true,
		"devicetaintrules": true, "csidrivers": true, "storageclasses": true, "volumeattachments": true,
		"csinodes": true, "volumeattributesclasses": true, "resourcequotas": true, "persistentvolumes": true,
		"serviceaccounts": true, "persistentvolumeclaims": true, "namespaces": true, "pods": true,
		"services": true, "podtemplates": true,
	}
	generation = map[string]bool{
		"priorityclasses": true, "ingressclasses": true, "networkpolicies": true, "ingresses": true,
		"endpointslices": true, "poddisruptionbudgets": true, "resourceslices": true, "deviceclasses": true,
		"devicetaintrules": true, "csidrivers": true, "flowschemas": true, "prioritylevelconfigurations": true,
		"daemonsets": true, "statefulsets": true, "deployments": true, "replicasets": true, "jobs": true,
		"cronjobs": true, "pods": true, "podtemplates": true, "replicationcontrollers": true,
		"validatingadmissionpolicies": true, "mutatingadmissionpolicies": true,
		"mutatingwebhookconfigurations": true, "validatingwebhookconfigurations": true,
		"mutatingadmissionpolicybindings": true, "validatingadmissionpolicybindings": true,
		"customresourcedefinitions": true,
	}
	scale = map[string]bool{
		"deployments": true, "replicasets": true, "statefulsets": true, "replicationcontrollers": true,
	}
	noStatus = map[string]bool{ // built-in kinds with a Status field but no status subresource
		"events": true, "componentstatuses": true,
	}
)

// policyFor returns the write policy of a resource. Custom resources are
// treated as the apiextensions apiserver treats them with a status
// subresource when their objects carry a status.
func policyFor(info Info) policy {
	r := info.Resource.Resource
	p := policy{
		createOnUpdate:      createOnUpdate[r],
		unconditionalUpdate: !conditionalUpdate[r],
		returnDeleted:       returnDeleted[r],
		generation:          generation[r],
		scale:               scale[r],
		gcUnsupported:       r == "events" && (info.Resource.Group == "" || info.Resource.Group == "events.k8s.io"),
		orphanDefault: r == "jobs" && info.Resource.Group == "batch" && info.Resource.Version == "v1" ||
			r == "replicationcontrollers" && info.Resource.Group == "" && info.Resource.Version == "v1",
		resource: r,
	}
	gvk := info.GVK()
	if codec.Known(gvk) {
		p.builtin = true
		p.status = hasStatusField(gvk) && !noStatus[r]
		if st, known := servesSubresource(info.Resource, "status"); known {
			p.status = st
			p.scale, _ = servesSubresource(info.Resource, "scale")
		}
		return p
	}
	p.unconditionalUpdate = false
	p.generation = true
	p.status = true
	return p
}

func hasStatusField(gvk schema.GroupVersionKind) bool {
	obj, err := codec.Scheme().New(gvk)
	if err != nil {
		return false
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	_, ok := t.FieldByName("Status")
	return ok
}
