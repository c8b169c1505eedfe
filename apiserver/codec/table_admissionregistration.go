package codec

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The printers of kube-apiserver v1.33 for admissionregistration.k8s.io's
// webhook configurations, ValidatingAdmissionPolicies and their bindings
// (printMutatingWebhook, printValidatingAdmissionPolicy, …).

func init() {
	const group = "admissionregistration.k8s.io"
	webhooks := []metav1.TableColumnDefinition{colName,
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
		colAge}
	printers[schema.GroupKind{Group: group, Kind: "MutatingWebhookConfiguration"}] = printer{
		columns: webhooks,
		cells: func(o runtime.Object, now time.Time) []any {
			c := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
			return []any{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "ValidatingWebhookConfiguration"}] = printer{
		columns: webhooks,
		cells: func(o runtime.Object, now time.Time) []any {
			c := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			return []any{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicy"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
			col("ParamKind", "ParamKind specifies the kind of resources used to parameterize this policy"),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			paramKind := "<unset>"
			if p.Spec.ParamKind != nil {
				paramKind = p.Spec.ParamKind.APIVersion + "/" + p.Spec.ParamKind.Kind
			}
			return []any{p.Name, int64(len(p.Spec.Validations)), paramKind, age(p.CreationTimestamp, now)}
		},
	}
	printers[schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicyBinding"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("PolicyName", "PolicyName indicates the policy definition which the policy binding binded to"),
			col("ParamRef", "ParamRef indicates the param resource which sets the configration param"),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
			return []any{b.Name, b.Spec.PolicyName, paramRefName(b.Spec.ParamRef), age(b.CreationTimestamp, now)}
		},
	}
}

// paramRefName is namespace/name of a binding's parameter ("*/name" when
// the namespace is unset), its selector, or "<unset>".
func paramRefName(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		// Whether the parameter is cluster-scoped is not known here.
		return "*/" + pr.Name
	case pr.Selector != nil:
		// The generated String of the selector, as the apiserver prints it.
		return pr.Selector.String()
	}
	return "<unset>"
}
