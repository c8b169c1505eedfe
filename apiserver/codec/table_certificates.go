package codec

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// The CertificateSigningRequest printer of kube-apiserver v1.33
// (printCertificateSigningRequest, extractCSRStatus).

func init() {
	spec, status := certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc(), certificatesv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()
	printers[schema.GroupKind{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}] = printer{
		columns: []metav1.TableColumnDefinition{colName, colAge,
			col("SignerName", spec["signerName"]),
			col("Requestor", spec["request"]),
			col("RequestedDuration", spec["expirationSeconds"]),
			col("Condition", status["conditions"])},
		cells: func(o runtime.Object, now time.Time) []any {
			csr := o.(*certificatesv1.CertificateSigningRequest)
			requested := "<none>"
			if s := csr.Spec.ExpirationSeconds; s != nil {
				requested = duration.HumanDuration(time.Duration(*s) * time.Second)
			}
			return []any{csr.Name, age(csr.CreationTimestamp, now), orNone(csr.Spec.SignerName), csr.Spec.Username, requested, csrStatus(csr)}
		},
	}
}

// csrStatus is Denied, Approved or Pending, then ",Failed" and ",Issued".
func csrStatus(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	switch {
	case denied:
		status = "Denied"
	case approved:
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}
