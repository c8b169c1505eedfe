package world

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// The world's authorizer, as kube-apiserver v1.33's chain with
// --authorization-mode=RBAC answers an access review: a user in
// system:masters may do anything (the privileged group); anyone else
// what the world's RBAC objects grant (pkg/registry/rbac/validation's
// rule resolver: the ClusterRoleBindings, then the RoleBindings of the
// request's namespace, the first rule that allows naming its binding).

// privilegedGroup is the group the apiserver allows everything.
const privilegedGroup = "system:masters"

// access is what an access review asks about.
type access struct {
	user   string
	groups []string
	// A resource request, or (path not "") a non-resource one.
	verb, group, resource, subresource, name, namespace string
	path                                                string
}

// authorize answers an access review (the lock is held): allowed, and
// the reason RBAC gives when it allows.
func (s *Store) authorize(a access) (allowed bool, reason string) {
	for _, g := range a.groups {
		if g == privilegedGroup {
			return true, ""
		}
	}
	for _, e := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "clusterrolebindings"}) {
		b, ok := e.(*rbacv1.ClusterRoleBinding)
		if !ok {
			continue
		}
		if sub, ok := a.subject(b.Subjects, ""); ok && s.roleAllows(b.RoleRef, "", a) {
			return true, fmt.Sprintf("RBAC: allowed by ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(sub, ""))
		}
	}
	if a.namespace == "" {
		return false, ""
	}
	for _, e := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "rolebindings"}) {
		b, ok := e.(*rbacv1.RoleBinding)
		if !ok || b.Namespace != a.namespace {
			continue
		}
		if sub, ok := a.subject(b.Subjects, b.Namespace); ok && s.roleAllows(b.RoleRef, b.Namespace, a) {
			return true, fmt.Sprintf("RBAC: allowed by RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(sub, b.Namespace))
		}
	}
	return false, ""
}

// currentOf decodes the current objects of a resource (the lock is held).
func (s *Store) currentOf(r Resource) []runtime.Object {
	h, ok := s.res[r]
	if !ok {
		return nil
	}
	var out []runtime.Object
	for _, k := range sortedKeys(h.objs) {
		e := s.current(h, k)
		if e == nil {
			continue
		}
		obj, err := codec.Decode(e.obj)
		if err == nil {
			out = append(out, obj)
		}
	}
	return out
}

// subject returns the binding's subject that is a's user or one of its
// groups (a service account's user is system:serviceaccount:NS:NAME).
func (a access) subject(subs []rbacv1.Subject, bindingNS string) (*rbacv1.Subject, bool) {
	for i := range subs {
		s := &subs[i]
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == a.user {
				return s, true
			}
		case rbacv1.GroupKind:
			for _, g := range a.groups {
				if g == s.Name {
					return s, true
				}
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNS
			}
			if a.user == "system:serviceaccount:"+ns+":"+s.Name {
				return s, true
			}
		}
	}
	return nil, false
}

// roleAllows reports whether the role ref names (a ClusterRole, or a
// Role of namespace ns) has a rule allowing a.
func (s *Store) roleAllows(ref rbacv1.RoleRef, ns string, a access) bool {
	var rules []rbacv1.PolicyRule
	switch ref.Kind {
	case "ClusterRole":
		for _, o := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "clusterroles"}) {
			if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == ref.Name {
				rules = r.Rules
			}
		}
	case "Role":
		for _, o := range s.currentOf(Resource{Group: rbacv1.GroupName, Version: "v1", Resource: "roles"}) {
			if r, ok := o.(*rbacv1.Role); ok && r.Name == ref.Name && r.Namespace == ns {
				rules = r.Rules
			}
		}
	}
	for i := range rules {
		if a.allowedBy(&rules[i]) {
			return true
		}
	}
	return false
}

// allowedBy is RuleAllows (pkg/apis/rbac/v1/evaluation_helpers.go).
func (a access) allowedBy(r *rbacv1.PolicyRule) bool {
	if !matches(r.Verbs, a.verb, rbacv1.VerbAll) {
		return false
	}
	if a.path != "" {
		for _, u := range r.NonResourceURLs {
			if u == rbacv1.NonResourceAll || u == a.path || strings.HasSuffix(u, "*") && strings.HasPrefix(a.path, strings.TrimRight(u, "*")) {
				return true
			}
		}
		return false
	}
	if !matches(r.APIGroups, a.group, rbacv1.APIGroupAll) {
		return false
	}
	combined := a.resource
	if a.subresource != "" {
		combined += "/" + a.subresource
	}
	resOK := false
	for _, res := range r.Resources {
		if res == rbacv1.ResourceAll || res == combined || a.subresource != "" && res == "*/"+a.subresource {
			resOK = true
		}
	}
	return resOK && (len(r.ResourceNames) == 0 || matches(r.ResourceNames, a.name, ""))
}

func matches(vs []string, v, all string) bool {
	for _, x := range vs {
		if x == v || all != "" && x == all {
			return true
		}
	}
	return false
}

// describeSubject is the rule resolver's name of a binding's subject.
func describeSubject(s *rbacv1.Subject, bindingNS string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}
