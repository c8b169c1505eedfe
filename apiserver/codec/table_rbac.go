package codec

import (
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The RoleBinding and ClusterRoleBinding printers of kube-apiserver v1.33
// (printRoleBinding, printClusterRoleBinding, rbac.SubjectsStrings).

func init() {
	columns := func(kind, roleRefDoc string) []metav1.TableColumnDefinition {
		wide := func(name string) metav1.TableColumnDefinition {
			return metav1.TableColumnDefinition{Name: name, Type: "string", Priority: 1, Description: name + " in the " + kind}
		}
		return []metav1.TableColumnDefinition{colName, col("Role", roleRefDoc), colAge,
			wide("Users"), wide("Groups"), wide("ServiceAccounts")}
	}
	printers[schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}] = printer{
		columns: columns("roleBinding", doc133["RoleBinding.roleRef"]),
		cells: func(o runtime.Object, now time.Time) []any {
			rb := o.(*rbacv1.RoleBinding)
			return bindingCells(rb.Name, rb.RoleRef, rb.Subjects, rb.CreationTimestamp, now)
		},
	}
	printers[schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}] = printer{
		columns: columns("clusterRoleBinding", doc133["ClusterRoleBinding.roleRef"]),
		cells: func(o runtime.Object, now time.Time) []any {
			crb := o.(*rbacv1.ClusterRoleBinding)
			return bindingCells(crb.Name, crb.RoleRef, crb.Subjects, crb.CreationTimestamp, now)
		},
	}
}

func bindingCells(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time, now time.Time) []any {
	users, groups, sas := []string{}, []string{}, []string{}
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return []any{name, ref.Kind + "/" + ref.Name, age(created, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}
