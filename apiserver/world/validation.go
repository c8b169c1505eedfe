package world

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// Field validation (the fieldValidation query parameter of creates,
// updates and patches, kube-apiserver v1.33): fields a built-in kind does
// not declare, and fields given twice, are refused with Strict, reported
// as Warning headers with Warn (the default) and let through with Ignore.
// Custom resources are not checked (their schemas are not known).

// fieldValidation reads a request's fieldValidation parameter: "Strict",
// "Warn" (also when absent) or "Ignore"; another value makes the options
// of kind optionsKind (CreateOptions, …) invalid, as the apiserver's
// validation of them says.
func fieldValidation(r *Request, optionsKind string) (string, error) {
	v := r.Query.Get("fieldValidation")
	switch v {
	case "":
		return metav1.FieldValidationWarn, nil
	case metav1.FieldValidationIgnore, metav1.FieldValidationWarn, metav1.FieldValidationStrict:
		return v, nil
	}
	return "", apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "", field.ErrorList{
		field.NotSupported(field.NewPath("fieldValidation"), v, []string{"", metav1.FieldValidationIgnore,
			metav1.FieldValidationStrict, metav1.FieldValidationWarn})})
}

// unknownFields returns the strict decoding errors of JSON or YAML body
// (media type mt) as an object of built-in kind gvk: "unknown field
// \"spec.foo\"", "duplicate field \"data\"". None for other kinds and
// encodings.
func unknownFields(mt string, body []byte, gvk schema.GroupVersionKind) []string {
	if !codec.Known(gvk) {
		return nil
	}
	switch mt {
	case codec.MediaJSON:
	case codec.MediaYAML:
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil
		}
		body = j
	default:
		return nil
	}
	obj := newObject(gvk)
	strict, err := kjson.UnmarshalStrict(body, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(strict))
	for _, e := range strict {
		out = append(out, e.Error())
	}
	return out
}

// checkFields applies field validation to the body of a create or an
// update: with Strict, a 400 naming the fields; with Warn, the warnings.
func checkFields(mode, mt string, body []byte, gvk schema.GroupVersionKind) (warnings []string, err error) {
	if mode == metav1.FieldValidationIgnore {
		return nil, nil
	}
	errs := unknownFields(mt, body, gvk)
	if len(errs) == 0 {
		return nil, nil
	}
	if mode == metav1.FieldValidationStrict {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
			gvk.Kind, gvk.Version, gvk.Kind, strings.Join(errs, ", ")))
	}
	return errs, nil
}

// checkPatchedFields applies field validation to a patched object (its
// JSON, patched): with Strict, the apiserver's 422 showing what (shown)
// could not be decoded strictly; with Warn, the warnings.
func checkPatchedFields(mode string, patched []byte, shown string, gvk schema.GroupVersionKind) (warnings []string, err error) {
	if mode == metav1.FieldValidationIgnore {
		return nil, nil
	}
	errs := unknownFields(codec.MediaJSON, patched, gvk)
	if len(errs) == 0 {
		return nil, nil
	}
	if mode == metav1.FieldValidationStrict {
		return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), shown, "strict decoding error: "+strings.Join(errs, ", "))})
	}
	return errs, nil
}

// WarningHeader formats a warning as the apiserver's Warning header value
// (RFC 7234 section 5.5: code 299, agent "-", the text quoted).
func WarningHeader(text string) string {
	return "299 - " + strconv.Quote(text)
}

// MaxJSONPatchCopyBytes bounds the bytes the copy operations of one JSON
// patch may add, as kube-apiserver's JSONPatchMaxCopyBytes (the request
// body limit, 3 MiB) bounds jsonpatch.AccumulatedCopySizeLimit: 30 copies
// of an array into itself would otherwise double it 30 times.
const MaxJSONPatchCopyBytes = MaxBodyBytes

func init() {
	// What the apiserver sets at start-up for the same library.
	jsonpatch.AccumulatedCopySizeLimit = MaxJSONPatchCopyBytes
}

// badValue is v as kube-apiserver v1.33's field errors print a bad value
// (its apimachinery's ErrorBody): nil as "null", a pointer as what it
// points to, a Stringer as its String, a struct as Go syntax (%#v); the
// apimachinery linked here prints JSON instead.
func badValue(v any) any {
	rv := reflect.ValueOf(v)
	switch {
	case v == nil || rv.Kind() == reflect.Pointer && rv.IsNil():
		return "null"
	case rv.Kind() == reflect.Pointer:
		v = rv.Elem().Interface()
	}
	switch t := v.(type) {
	case int64, int32, float64, float32, bool, string:
		return t
	case fmt.Stringer:
		return printedValue(t.String())
	}
	return printedValue(fmt.Sprintf("%#v", v))
}

// printedValue is a bad value's text: not JSON, a Stringer, as the field
// errors of this apimachinery print one verbatim.
type printedValue string

func (p printedValue) String() string               { return string(p) }
func (p printedValue) MarshalJSON() ([]byte, error) { return nil, errors.New("printed with String") }
