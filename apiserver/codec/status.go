package codec

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewStatus returns an apiserver error with a failure Status: code,
// reason and message, no details.
func NewStatus(code int, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
	}}
}

// StatusOf returns the Status an error is answered with: its own for an
// APIStatus (apimachinery's errors), else a 500 InternalError carrying its
// message, as the apiserver's ErrorToAPIStatus does.
func StatusOf(err error) *metav1.Status {
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		st := as.Status()
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		return &st
	}
	st := apierrors.NewInternalError(err).ErrStatus
	return &st
}
