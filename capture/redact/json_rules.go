package redact

// What the JSON walker looks for and what it decides: the values that may
// be credentials (why), the rules of the package documentation (decide),
// the member names and contexts it tracks, and its frames.

import (
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// lastApplied is the annotation kubectl apply writes: for a Secret it
// holds the whole object, values included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// why says what a candidate value is.
type why uint8

const (
	whyData        why = iota + 1 // a Secret's data value (base64)
	whyStringData                 // a Secret's stringData value
	whyLastApplied                // the last-applied-configuration annotation
	whyToken                      // TokenRequest status.token
	whyReviewToken                // TokenReview spec.token
	whyPatch                      // a value set by a patch sent to a Secret endpoint
)

func (w why) reason() formats.RedactReason {
	switch w {
	case whyLastApplied:
		return formats.RedactLastApplied
	case whyToken, whyReviewToken:
		return formats.RedactToken
	}
	return formats.RedactSecretValue
}

func (w why) field(key string) string {
	switch w {
	case whyData:
		return "data." + key
	case whyStringData:
		return "stringData." + key
	case whyLastApplied:
		return "last-applied-configuration"
	case whyToken:
		return "status.token"
	case whyReviewToken:
		return "spec.token"
	}
	return "value"
}

// decision is what becomes of a candidate value.
type decision uint8

const (
	dKeep    decision = iota
	dRedact           // replace it
	dContent          // replace it if its own content is (or holds) a Secret
	dPending          // its owner's kind is not known yet
)

// decide applies the rules of the package documentation to a value of
// an object of the given kind ("" when the object has none).
func decide(w why, kind string) decision {
	switch w {
	case whyPatch:
		return dRedact
	case whyData, whyStringData:
		if kind == "Secret" {
			return dRedact
		}
	case whyLastApplied:
		// The annotation copies the object as applied: a Secret's is one;
		// any other's is judged by what it holds (a custom resource may
		// embed a Secret, a PartialObjectMetadata or a kindless object
		// may be a Secret's view).
		if kind == "Secret" {
			return dRedact
		}
		return dContent
	case whyToken:
		if kind == "TokenRequest" {
			return dRedact
		}
	case whyReviewToken:
		if kind == "TokenReview" {
			return dRedact
		}
	}
	return dKeep
}

// itemKind is the kind of the items of a list of kind list ("" if not
// known: a v1 List's items carry their own).
func itemKind(list string) string {
	if k, ok := strings.CutSuffix(list, "List"); ok && k != "" {
		return k
	}
	return ""
}

// ctx is what a container is, relative to the object that owns it.
type ctx uint8

const (
	cNone        ctx = iota
	cData            // inside an owner's data or stringData: strings are candidates
	cPatch           // inside a value of a JSON patch to a Secret: strings are redacted
	cPatchArray      // the root array of a JSON patch (RFC 6902) to a Secret
	cPatchOp         // an operation of cPatchArray
	cMetadata        // an owner's metadata
	cAnnotations     // an owner's metadata.annotations
	cStatus          // an owner's status
	cSpec            // an owner's spec
	cItems           // an owner's items array
)

// member names the walker looks for.
type key uint8

const (
	kOther key = iota
	kKind
	kData
	kStringData
	kMetadata
	kAnnotations
	kStatus
	kSpec
	kToken
	kItems
	kValue
	kName
	kNamespace
	kLastApplied
)

// keyOf returns the member name's key (a switch: faster than a map for
// these few names).
func keyOf(name string) key {
	switch name {
	case "kind":
		return kKind
	case "data":
		return kData
	case "stringData":
		return kStringData
	case "metadata":
		return kMetadata
	case "annotations":
		return kAnnotations
	case "status":
		return kStatus
	case "spec":
		return kSpec
	case "token":
		return kToken
	case "items":
		return kItems
	case "value":
		return kValue
	case "name":
		return kName
	case "namespace":
		return kNamespace
	case lastApplied:
		return kLastApplied
	}
	return kOther
}

// cand is a candidate value: the bytes between a string's quotes, at
// absolute offsets [start, end) (end < 0 while the string is open).
type cand struct {
	start, end int64
	why        why
	b64        bool
	d          decision
	field      string // member name under data / stringData
	owner      int    // stack index of the owning object; -1: none (a patch) or forwarded
	// forwarded: the value of a kindless list item, waiting for the
	// list's kind; the item's kind (once known), namespace and name.
	forwarded         bool
	okind, ons, oname string
}

// jframe is an open object or array.
type jframe struct {
	obj   bool
	ctx   ctx
	owner int // for cData, cMetadata, cAnnotations, cStatus, cSpec, cItems: the owner's index
	dwhy  why // for cData: whyData or whyStringData
	key   key
	ktext string // current member name (clipped)

	// As an owner (objects only).
	kind         string
	hasKind      bool
	itemsDecided bool // values of its kindless items were decided by its kind
	item         bool // an element of the items of the object at owner
	assume       bool // the root of a body sent to a Secret endpoint: a Secret if it has no kind
	name         string
	ns           string
	cands        []cand // waiting for kind
	icands       []cand // waiting for kind, forwarded by kindless items
	done         []done // redacted, reported when the object ends (its name is known then)
}

type done struct {
	why   why
	field string
	n     int64
}
