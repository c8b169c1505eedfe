package world

import (
	"fmt"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// APIServices as kube-apiserver v1.33's aggregator keeps them
// (k8s.io/kube-aggregator v0.33: pkg/registry/apiservice and
// pkg/apis/apiregistration/validation). The available controller's
// checks of a non-local APIService's Service and endpoints are not
// modelled: such an APIService keeps the status it has.

// validateAPIService is ValidateAPIService: the name is
// spec.version + "." + spec.group, the group a DNS subdomain (empty only
// for v1), the version a DNS label, the priorities in range, and a local
// APIService (no spec.service) has no caBundle nor insecureSkipTLSVerify,
// a service one a service namespace, name and valid port.
func validateAPIService(as *apiregistrationv1.APIService) field.ErrorList {
	required := as.Spec.Version + "." + as.Spec.Group
	errs := apivalidation.ValidateObjectMeta(&as.ObjectMeta, false, func(name string, prefix bool) []string {
		if msgs := path.IsValidPathSegmentName(name); len(msgs) > 0 {
			return msgs
		}
		if name != required {
			return []string{fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)}
		}
		return nil
	}, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	if as.Spec.Group == "" && as.Spec.Version != "v1" {
		errs = append(errs, field.Required(spec.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if as.Spec.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(as.Spec.Group) {
			errs = append(errs, field.Invalid(spec.Child("group"), as.Spec.Group, msg))
		}
	}
	for _, msg := range utilvalidation.IsDNS1035Label(as.Spec.Version) {
		errs = append(errs, field.Invalid(spec.Child("version"), as.Spec.Version, msg))
	}
	if as.Spec.GroupPriorityMinimum <= 0 || as.Spec.GroupPriorityMinimum > 20000 {
		errs = append(errs, field.Invalid(spec.Child("groupPriorityMinimum"), as.Spec.GroupPriorityMinimum, "must be positive and less than 20000"))
	}
	if as.Spec.VersionPriority <= 0 || as.Spec.VersionPriority > 1000 {
		errs = append(errs, field.Invalid(spec.Child("versionPriority"), as.Spec.VersionPriority, "must be positive and less than 1000"))
	}
	svc := as.Spec.Service
	if svc == nil {
		if len(as.Spec.CABundle) != 0 {
			errs = append(errs, field.Invalid(spec.Child("caBundle"), fmt.Sprintf("%d bytes", len(as.Spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if as.Spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), as.Spec.InsecureSkipTLSVerify, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	if svc.Namespace == "" {
		errs = append(errs, field.Required(spec.Child("service", "namespace"), ""))
	}
	if svc.Name == "" {
		errs = append(errs, field.Required(spec.Child("service", "name"), ""))
	}
	var port int32
	if svc.Port != nil {
		port = *svc.Port
	}
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(spec.Child("service", "port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if as.Spec.InsecureSkipTLSVerify && len(as.Spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), as.Spec.InsecureSkipTLSVerify, "may not be true if caBundle is present"))
	}
	return errs
}

// prepareAPIServiceCreate is the strategy's PrepareForCreate after the
// field manager: the status starts empty, a local APIService Available
// at once.
func prepareAPIServiceCreate(as *apiregistrationv1.APIService, now metav1.Time) {
	as.Status = apiregistrationv1.APIServiceStatus{}
	if as.Spec.Service == nil {
		as.Status.Conditions = []apiregistrationv1.APIServiceCondition{{
			Type:               apiregistrationv1.Available,
			Status:             apiregistrationv1.ConditionTrue,
			LastTransitionTime: now,
			Reason:             "Local",
			Message:            "Local APIServices are always available",
		}}
	}
}
