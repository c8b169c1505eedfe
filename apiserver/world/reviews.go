package world

import (
	"net/http"
	"reflect"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The create-only review resources (authorization.k8s.io's access and
// rules reviews, authentication.k8s.io's token and self-subject
// reviews): answered, never stored, as kube-apiserver's REST storages of
// them do (pkg/registry/authorization, pkg/registry/authentication). A
// replay authenticates no one: the client asking about itself is taken
// to be Options.User, by default an administrator in system:masters
// (kubectl auth can-i says yes), as a replay answers every write; other subjects are authorized
// by the world's RBAC objects (rbac.go). A token review knows the tokens
// the world issued (token.go).

// DefaultUser is who a replay's client is taken to be unless
// Options.User says: an administrator in system:masters.
var DefaultUser = authenticationv1.UserInfo{Username: "system:admin", Groups: []string{privilegedGroup, "system:authenticated"}}

// user returns who a client is taken to be (Options.User, or DefaultUser),
// a copy the caller may keep.
func (s *Store) user() authenticationv1.UserInfo {
	u := DefaultUser
	if s.opts.User != nil {
		u = *s.opts.User
	}
	u.Groups = append([]string(nil), u.Groups...)
	if u.Extra != nil {
		extra := make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = append(authenticationv1.ExtraValue(nil), v...)
		}
		u.Extra = extra
	}
	return u
}

// reviewREST is one review resource's storage.
type reviewREST struct{}

func (reviewREST) serves(Info, policy) bool { return true }

func (reviewREST) create(s *Store, c *call) *Response {
	in, err := readWrite(c, "CreateOptions", c.info.GVK())
	if err != nil {
		return s.fail(c, err)
	}
	if err := checkNamespace(in.m, c.t, c.info); err != nil {
		return s.fail(c, err)
	}
	if mgr, err := fieldManager(c.info.GVK(), ""); err == nil {
		in.obj = mgr.UpdateNoErrors(newObject(c.info.GVK()), in.obj, in.p.manager)
		fixManagedTimes(newObject(c.info.GVK()), in.obj, s.timeNow())
	}
	s.mu.Lock()
	out, err := s.review(in.obj)
	s.mu.Unlock()
	if err != nil {
		return s.fail(c, err)
	}
	out.GetObjectKind().SetGroupVersionKind(c.info.GVK())
	return withWarnings(s.respondObject(c.r, c.info, http.StatusCreated, out, c.how, false), in.warnings)
}

// review answers one review (the lock is held).
func (s *Store) review(obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		if errs := validateAccess(o.ObjectMeta, "", nil, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, true); len(errs) > 0 {
			return nil, invalidReview(authorizationv1.GroupName, errs)
		}
		o.Status = s.accessStatus(accessOf(s.user().Username, s.user().Groups, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes))
		return o, nil
	case *authorizationv1.SubjectAccessReview:
		if errs := validateAccess(o.ObjectMeta, o.Spec.User, o.Spec.Groups, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, false); len(errs) > 0 {
			return nil, invalidReview(authorizationv1.GroupName, errs)
		}
		o.Status = s.accessStatus(accessOf(o.Spec.User, o.Spec.Groups, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes))
		return o, nil
	case *authorizationv1.LocalSubjectAccessReview:
		if errs := validateLocalAccess(o); len(errs) > 0 {
			return nil, invalidReview(authorizationv1.GroupName, errs)
		}
		o.Status = s.accessStatus(accessOf(o.Spec.User, o.Spec.Groups, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes))
		return o, nil
	case *authorizationv1.SelfSubjectRulesReview:
		if o.Spec.Namespace == "" {
			return nil, apierrors.NewBadRequest("no namespace on request")
		}
		return &authorizationv1.SelfSubjectRulesReview{Status: s.rulesOf(s.user().Username, s.user().Groups, o.Spec.Namespace)}, nil
	case *authenticationv1.TokenReview:
		o.Status = s.tokenStatus(o.Spec)
		return o, nil
	case *authenticationv1.SelfSubjectReview:
		return &authenticationv1.SelfSubjectReview{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: s.timeNow()},
			Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: s.user()}}, nil
	}
	return nil, apierrors.NewBadRequest("not a review")
}

// accessOf is the access a review's attributes ask about.
func accessOf(user string, groups []string, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) access {
	a := access{user: user, groups: groups}
	if ra != nil {
		a.verb, a.group, a.resource, a.subresource, a.name, a.namespace = ra.Verb, ra.Group, ra.Resource, ra.Subresource, ra.Name, ra.Namespace
	} else if nra != nil {
		a.verb, a.path = nra.Verb, nra.Path
	}
	return a
}

// accessStatus is the status of an access review of a.
func (s *Store) accessStatus(a access) authorizationv1.SubjectAccessReviewStatus {
	allowed, reason := s.authorize(a)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Reason: reason}
}

// rulesOf lists what user (of groups) may do in namespace ns: the rules
// of the bindings naming them, as the rule resolver collects them; a
// privileged user with no RBAC objects in the world may do anything.
func (s *Store) rulesOf(user string, groups []string, ns string) authorizationv1.SubjectRulesReviewStatus {
	a := access{user: user, groups: groups}
	var rules []rbacv1.PolicyRule
	for _, o := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "clusterrolebindings"}) {
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok {
			if _, ok := a.subject(b.Subjects, ""); ok {
				rules = append(rules, s.rulesOfRole(b.RoleRef, "")...)
			}
		}
	}
	for _, o := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "rolebindings"}) {
		if b, ok := o.(*rbacv1.RoleBinding); ok && b.Namespace == ns {
			if _, ok := a.subject(b.Subjects, ns); ok {
				rules = append(rules, s.rulesOfRole(b.RoleRef, ns)...)
			}
		}
	}
	if len(rules) == 0 && matches(groups, privilegedGroup, "") {
		rules = []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
			{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
	}
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return st
}

// rulesOfRole returns the rules of the role ref names.
func (s *Store) rulesOfRole(ref rbacv1.RoleRef, ns string) []rbacv1.PolicyRule {
	switch ref.Kind {
	case "ClusterRole":
		for _, o := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "clusterroles"}) {
			if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == ref.Name {
				return r.Rules
			}
		}
	case "Role":
		for _, o := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "roles"}) {
			if r, ok := o.(*rbacv1.Role); ok && r.Name == ref.Name && r.Namespace == ns {
				return r.Rules
			}
		}
	}
	return nil
}

// validateAccess is ValidateSelfSubjectAccessReview and
// ValidateSubjectAccessReview: exactly one kind of attributes, a subject
// (not for a self review), and empty metadata.
func validateAccess(m metav1.ObjectMeta, user string, groups []string, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, self bool) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), badValue(nra), `cannot be specified in combination with resourceAttributes`))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes"), badValue(nra), `exactly one of nonResourceAttributes or resourceAttributes must be specified`))
	}
	if !self && user == "" && len(groups) == 0 {
		errs = append(errs, field.Invalid(spec.Child("user"), user, `at least one of user or group must be specified`))
	}
	shown := m
	m.ManagedFields = nil
	if !reflect.DeepEqual(metav1.ObjectMeta{}, m) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), badValue(shown), `must be empty`))
	}
	return errs
}

// validateLocalAccess is ValidateLocalSubjectAccessReview: its metadata
// empty but for the namespace, which its attributes must name.
func validateLocalAccess(o *authorizationv1.LocalSubjectAccessReview) field.ErrorList {
	m := o.ObjectMeta
	m.Namespace = ""
	errs := validateAccess(metav1.ObjectMeta{}, o.Spec.User, o.Spec.Groups, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, false)
	m.ManagedFields = nil
	if !reflect.DeepEqual(metav1.ObjectMeta{}, m) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), badValue(o.ObjectMeta), `must be empty except for namespace`))
	}
	if ra := o.Spec.ResourceAttributes; ra != nil && ra.Namespace != o.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, `must match metadata.namespace`))
	}
	if nra := o.Spec.NonResourceAttributes; nra != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), badValue(nra), `disallowed on this kind of request`))
	}
	return errs
}

// invalidReview is the review storages' 422: they name the kind of the
// internal object, which has none.
func invalidReview(group string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: group}, "", errs)
}
