package world

import (
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CustomResourceDefinitions as kube-apiserver v1.33's apiextensions
// server keeps them (k8s.io/apiextensions-apiserver v0.33: the registry's
// strategy, the validation of names, and the naming and establishing
// controllers it runs in-process).

// crdNameRule is the message of a CRD's name that is not its plural and
// group (ValidateCustomResourceDefinition's name function).
const crdNameRule = `must be spec.names.plural+"."+spec.group`

// validateCRD is the part of ValidateCustomResourceDefinition the world
// models: the object's metadata, its name (and generateName) a DNS
// subdomain equal to spec.names.plural + "." + spec.group.
func validateCRD(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	required := crd.Spec.Names.Plural + "." + crd.Spec.Group
	nameFn := func(name string, prefix bool) []string {
		msgs := apivalidation.NameIsDNSSubdomain(name, prefix)
		if name != required {
			msgs = append(msgs, crdNameRule)
		}
		return msgs
	}
	return apivalidation.ValidateObjectMeta(&crd.ObjectMeta, false, nameFn, field.NewPath("metadata"))
}

// prepareCRDCreate is the strategy's PrepareForCreate after the field
// manager (which does not count the status as the client's): the stored
// versions start with the storage version.
func prepareCRDCreate(crd *apiextensionsv1.CustomResourceDefinition) {
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Status.StoredVersions = []string{v.Name}
			break
		}
	}
}

// crdNames is the naming controller's calculateNamesAndConditions: the
// names of crd's spec it may accept (those no other CRD of its group has
// accepted), its NamesAccepted condition, and its Established one
// (False, Installing, once the names are accepted and until the
// establishing controller sets it). others are the group's other CRDs.
func crdNames(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	resources, kinds := sets.New[string](), sets.New[string]()
	for _, o := range others {
		if o.Spec.Group != crd.Spec.Group || o.Name == crd.Name {
			continue
		}
		a := o.Status.AcceptedNames
		resources.Insert(a.Plural, a.Singular)
		resources.Insert(a.ShortNames...)
		kinds.Insert(a.Kind, a.ListKind)
	}
	accepted := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	conflict := func(reason, name string) {
		accepted.Status = apiextensionsv1.ConditionFalse
		accepted.Reason = reason
		accepted.Message = `"` + name + `" is already in use`
	}
	fresh := func(requested, had string, used sets.Set[string]) bool {
		return requested == had || !used.Has(requested)
	}
	req, had := crd.Spec.Names, crd.Status.AcceptedNames
	names := had
	if fresh(req.Plural, had.Plural, resources) {
		names.Plural = req.Plural
	} else {
		conflict("PluralConflict", req.Plural)
	}
	if fresh(req.Singular, had.Singular, resources) {
		names.Singular = req.Singular
	} else {
		conflict("SingularConflict", req.Singular)
	}
	if !reflect.DeepEqual(req.ShortNames, had.ShortNames) {
		mine := sets.New(had.ShortNames...)
		var taken []string
		for _, n := range req.ShortNames {
			if !mine.Has(n) && resources.Has(n) {
				taken = append(taken, `"`+n+`" is already in use`)
			}
		}
		if len(taken) == 0 {
			names.ShortNames = req.ShortNames
		} else {
			accepted.Status = apiextensionsv1.ConditionFalse
			accepted.Reason = "ShortNamesConflict"
			accepted.Message = aggregateMessage(taken)
		}
	}
	if fresh(req.Kind, had.Kind, kinds) {
		names.Kind = req.Kind
	} else {
		conflict("KindConflict", req.Kind)
	}
	if fresh(req.ListKind, had.ListKind, kinds) {
		names.ListKind = req.ListKind
	} else {
		conflict("ListKindConflict", req.ListKind)
	}
	names.Categories = req.Categories
	if accepted.Status == apiextensionsv1.ConditionUnknown {
		accepted.Status = apiextensionsv1.ConditionTrue
		accepted.Reason = "NoConflicts"
		accepted.Message = "no conflicts found"
	}
	established := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
		Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}
	if old := crdCondition(crd, apiextensionsv1.Established); old != nil {
		established = *old
	}
	if established.Status != apiextensionsv1.ConditionTrue && accepted.Status == apiextensionsv1.ConditionTrue {
		established = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
			Status: apiextensionsv1.ConditionFalse, Reason: "Installing", Message: "the initial names have been accepted"}
	}
	return names, accepted, established
}

// aggregateMessage is utilerrors.NewAggregate's message of msgs.
func aggregateMessage(msgs []string) string {
	if len(msgs) == 1 {
		return msgs[0]
	}
	s := "["
	for i, m := range msgs {
		if i > 0 {
			s += ", "
		}
		s += m
	}
	return s + "]"
}

// nameCRD is the naming controller's sync of crd: false when it has
// nothing to write (the names of spec and status the same, or neither
// the accepted names nor the NamesAccepted condition changing).
func nameCRD(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition, now metav1.Time) bool {
	if apiequality.Semantic.DeepEqual(crd.Spec.Names, crd.Status.AcceptedNames) {
		return false
	}
	names, accepted, established := crdNames(crd, others)
	if reflect.DeepEqual(crd.Status.AcceptedNames, names) && conditionEquivalent(&accepted, crdCondition(crd, apiextensionsv1.NamesAccepted)) {
		return false
	}
	crd.Status.AcceptedNames = names
	setCRDCondition(crd, accepted, now)
	setCRDCondition(crd, established, now)
	return true
}

// establishCRD is the establishing controller's sync of crd: Established
// True once its names are accepted; false when it has nothing to write.
// (A conversion webhook's invalid CA bundle, which makes it False, is not
// modelled.)
func establishCRD(crd *apiextensionsv1.CustomResourceDefinition, now metav1.Time) bool {
	if !crdConditionTrue(crd, apiextensionsv1.NamesAccepted) || crdConditionTrue(crd, apiextensionsv1.Established) {
		return false
	}
	setCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
		Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}, now)
	return true
}

// crdEstablished reports whether the apiextensions server serves crd's
// resources (its Established condition is True).
func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crdConditionTrue(crd, apiextensionsv1.Established)
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func crdConditionTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	c := crdCondition(crd, t)
	return c != nil && c.Status == apiextensionsv1.ConditionTrue
}

// conditionEquivalent is IsCRDConditionEquivalent: the same type, status,
// reason and message.
func conditionEquivalent(a, b *apiextensionsv1.CustomResourceDefinitionCondition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// setCRDCondition is SetCRDCondition: the condition added or updated, its
// transition time now when its status changes.
func setCRDCondition(crd *apiextensionsv1.CustomResourceDefinition, c apiextensionsv1.CustomResourceDefinitionCondition, now metav1.Time) {
	c.LastTransitionTime = now
	old := crdCondition(crd, c.Type)
	if old == nil {
		crd.Status.Conditions = append(crd.Status.Conditions, c)
		return
	}
	if old.Status != c.Status || old.LastTransitionTime.IsZero() {
		old.LastTransitionTime = now
	}
	old.Status, old.Reason, old.Message = c.Status, c.Reason, c.Message
}
