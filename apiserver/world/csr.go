package world

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// resetFields returns the fields a kind's strategy resets, which the
// field manager never counts as the writer's (the registry strategies'
// GetResetFields), or nil (see also serverKindResetFields). A
// CertificateSigningRequest's spec is set
// from the requestor on create and kept on update, its status written
// only through the subresources: no manager of the main resource owns
// either.
func resetFields(gvk schema.GroupVersionKind, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if gvk == csrGVK && subresource == "" {
		return map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(
				fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status"))),
		}
	}
	return serverKindResetFields(gvk, subresource)
}

var csrGVK = certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest")

// prepareCSR is the certificate signing request strategy's
// PrepareForCreate: whatever the client wrote of the requestor is
// replaced by who it is taken to be (Store.user), and the request starts
// with no conditions. Other objects are left as they are.
func (s *Store) prepareCSR(obj runtime.Object) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}
	u := s.user()
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = u.Username, u.UID, u.Groups, nil
	if len(u.Extra) > 0 {
		csr.Spec.Extra = make(map[string]certificatesv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			csr.Spec.Extra[k] = certificatesv1.ExtraValue(v)
		}
	}
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}
