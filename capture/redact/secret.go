package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"mime"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/jsonscan"
)

// lastApplied is the annotation kubectl apply writes: for a Secret it holds
// the whole object, values included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Secrets replaces the values of Kubernetes Secret objects — data,
// stringData, and the last-applied-configuration annotation that repeats
// them — in watch events and in bodies.
//
// Redaction preserves lengths: each value is replaced by a placeholder of
// exactly the same encoded length ("redacted-" followed by a keyed hash of
// the value, cut or repeated to fit; base64 values stay valid base64 of the
// same decoded length). So JSON and protobuf framing, body offsets and chunk
// boundaries stay valid and clients still decode the objects; equal values
// get equal placeholders within one session (a changed value shows as a
// changed placeholder), but the key is random per Secrets, so placeholders
// reveal nothing across sessions and cannot be brute-forced.
//
// A Secrets is safe for concurrent use.
type Secrets struct {
	key [32]byte
}

// NewSecrets returns a Secrets with a fresh random key.
func NewSecrets() *Secrets {
	s := &Secrets{}
	rand.Read(s.key[:])
	return s
}

// span is a value to overwrite: b[start:end] (for JSON, inside the quotes).
type span struct {
	start, end int
	base64     bool // a base64 value (JSON "data"): keep it valid base64
}

// Event redacts one watch event's exact bytes (frame.Event.Data) in format
// f. It returns data itself when the event holds no Secret, else a
// redacted copy and the lengths of the values it replaced.
func (s *Secrets) Event(f frame.Format, data []byte) ([]byte, []int) {
	var spans []span
	switch f {
	case frame.JSON:
		if !bytes.Contains(data, []byte(`"Secret`)) {
			return data, nil
		}
		spans = jsonSpans(data, false)
	case frame.Protobuf:
		if !bytes.Contains(data, []byte("Secret")) {
			return data, nil
		}
		spans = protoEventSpans(data)
	default:
		return data, nil
	}
	if len(spans) == 0 {
		return data, nil
	}
	return s.apply(data, spans)
}

// ErrCannotRedact means a body that may hold Secret values is in a form
// wtrace cannot parse; such a body must not be stored.
var ErrCannotRedact = errors.New("redact: cannot redact this body")

// Body redacts a whole decoded (not content-encoded) body of the given
// media type. A body sent to or from a Secret endpoint (secretPath) is
// treated as a Secret even without a kind — patches carry none — and must
// be JSON or protobuf: anything else returns ErrCannotRedact. Other bodies
// are redacted where they hold Secret or SecretList objects.
func (s *Secrets) Body(contentType string, body []byte, secretPath bool) ([]byte, []int, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case len(body) == 0:
		return body, nil, nil
	case strings.HasSuffix(mt, "json") || mt == "" && looksJSON(body):
		if !secretPath && !bytes.Contains(body, []byte(`"Secret`)) {
			return body, nil, nil
		}
		if !looksJSON(body) {
			return nil, nil, ErrCannotRedact
		}
		spans := jsonSpans(body, secretPath)
		out, lens := s.apply(body, spans)
		return out, lens, nil
	case mt == "application/vnd.kubernetes.protobuf" || bytes.HasPrefix(body, protoMagic):
		if !secretPath && !bytes.Contains(body, []byte("Secret")) {
			return body, nil, nil
		}
		spans, ok := protoObjectSpans(body)
		if !ok {
			if secretPath {
				return nil, nil, ErrCannotRedact
			}
			return body, nil, nil
		}
		out, lens := s.apply(body, spans)
		return out, lens, nil
	}
	if secretPath {
		return nil, nil, ErrCannotRedact
	}
	return body, nil, nil
}

func looksJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// SecretPath reports whether a request-target addresses Secrets (a path
// segment "secrets"): its bodies are redacted as Secrets.
func SecretPath(target string) bool {
	path, _, _ := strings.Cut(target, "?")
	for _, seg := range strings.Split(path, "/") {
		if seg == "secrets" {
			return true
		}
	}
	return false
}

// apply returns a copy of data with every span replaced by a placeholder
// of the same length, and the values' lengths.
func (s *Secrets) apply(data []byte, spans []span) ([]byte, []int) {
	out := bytes.Clone(data)
	lens := make([]int, 0, len(spans))
	for _, sp := range spans {
		v := data[sp.start:sp.end]
		mac := hmac.New(sha256.New, s.key[:])
		mac.Write(v)
		tag := "redacted-" + hex.EncodeToString(mac.Sum(nil))[:16]
		if sp.base64 {
			n := base64.StdEncoding.DecodedLen(len(v))
			if dec, err := base64.StdEncoding.DecodeString(string(v)); err == nil {
				n = len(dec)
			}
			enc := base64.StdEncoding.EncodeToString(fill(tag, n))
			if len(enc) == len(v) {
				copy(out[sp.start:], enc)
			} else {
				// Not canonical base64: any valid base64 of the same length.
				copy(out[sp.start:sp.end], bytes.Repeat([]byte("A"), len(v)))
			}
			lens = append(lens, n)
			continue
		}
		copy(out[sp.start:sp.end], fill(tag, len(v)))
		lens = append(lens, len(v))
	}
	return out, lens
}

// fill repeats tag (ASCII) to exactly n bytes.
func fill(tag string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = tag[i%len(tag)]
	}
	return b
}

// JSON

// jsonSpans finds the values to redact in a JSON document: a watch event
// ({"type":…,"object":…}), an object of kind Secret, a SecretList (whose
// items carry no kind), or, with assumeSecret, a top-level object treated
// as a Secret (a patch) or a JSON patch (RFC 6902) of one.
func jsonSpans(b []byte, assumeSecret bool) []span {
	i := jsonscan.SkipSpace(b, 0)
	var spans []span
	switch {
	case i < len(b) && b[i] == '{':
		walkJSONObject(b, 0, assumeSecret, &spans)
	case i < len(b) && b[i] == '[' && assumeSecret:
		// A JSON patch: every value it sets.
		jsonscan.EachElement(b, func(op []byte, at int) error {
			if op[0] == '{' {
				jsonscan.EachMember(op, func(key, val []byte, vat int) bool {
					if jsonscan.KeyIs(key, "value") {
						allStrings(val, at+vat, &spans)
					}
					return true
				})
			}
			return nil
		})
	}
	return spans
}

// member is an object member's value and its offset in the document.
type member struct {
	val []byte
	at  int
}

// walkJSONObject inspects the object obj, which starts at offset base of
// the document.
func walkJSONObject(obj []byte, base int, assumeSecret bool, spans *[]span) {
	members := map[string]member{}
	err := jsonscan.EachMember(obj, func(key, val []byte, at int) bool {
		for _, k := range [...]string{"kind", "type", "object", "items", "data", "stringData", "metadata"} {
			if jsonscan.KeyIs(key, k) {
				members[k] = member{val, base + at}
			}
		}
		return true
	})
	if err != nil {
		return
	}
	if o, ok := members["object"]; ok {
		if _, isEvent := members["type"]; isEvent && o.val[0] == '{' {
			walkJSONObject(o.val, o.at, false, spans) // a watch event
			return
		}
	}
	var kind string
	if k, ok := members["kind"]; ok {
		kind, _ = jsonscan.String(k.val, k.at)
	}
	items := func(assume bool) {
		if it, ok := members["items"]; ok && it.val[0] == '[' {
			jsonscan.EachElement(it.val, func(item []byte, at int) error {
				if item[0] == '{' {
					walkJSONObject(item, it.at+at, assume, spans)
				}
				return nil
			})
		}
	}
	switch {
	case kind == "Secret" || assumeSecret && kind == "":
		secretJSON(members, spans)
	case kind == "SecretList" || assumeSecret && kind == "List":
		items(true) // the apiserver's list items carry no kind
	case strings.HasSuffix(kind, "List"):
		items(false) // a generic list (kubectl get -o json) may hold Secrets
	}
}

// secretJSON adds the spans of a Secret object's values.
func secretJSON(members map[string]member, spans *[]span) {
	for _, field := range []string{"data", "stringData"} {
		m, ok := members[field]
		if !ok || m.val[0] != '{' {
			continue
		}
		jsonscan.EachMember(m.val, func(_, val []byte, at int) bool {
			if val[0] == '"' {
				inner := val[1 : len(val)-1]
				*spans = append(*spans, span{start: m.at + at + 1, end: m.at + at + len(val) - 1,
					base64: field == "data" && !bytes.Contains(inner, []byte{'\\'})})
			}
			return true
		})
	}
	md, ok := members["metadata"]
	if !ok || md.val[0] != '{' {
		return
	}
	jsonscan.EachMember(md.val, func(key, ann []byte, aat int) bool {
		if !jsonscan.KeyIs(key, "annotations") || ann[0] != '{' {
			return true
		}
		jsonscan.EachMember(ann, func(k, v []byte, vat int) bool {
			if jsonscan.KeyIs(k, lastApplied) && v[0] == '"' {
				start := md.at + aat + vat
				*spans = append(*spans, span{start: start + 1, end: start + len(v) - 1})
			}
			return true
		})
		return true
	})
}

// allStrings adds every string value (not object keys) in val, which
// starts at offset base of the document.
func allStrings(val []byte, base int, spans *[]span) {
	switch val[0] {
	case '"':
		*spans = append(*spans, span{start: base + 1, end: base + len(val) - 1})
	case '{':
		jsonscan.EachMember(val, func(_, v []byte, at int) bool {
			allStrings(v, base+at, spans)
			return true
		})
	case '[':
		jsonscan.EachElement(val, func(v []byte, at int) error {
			allStrings(v, base+at, spans)
			return nil
		})
	}
}

// Protobuf (k8s.io/api/core/v1/generated.proto, apimachinery runtime and
// meta/v1 generated.proto)

var protoMagic = []byte("k8s\x00")

const (
	fieldWatchEventObject = 2 // metav1.WatchEvent.object (RawExtension)
	fieldRawExtensionRaw  = 1 // runtime.RawExtension.raw
	fieldUnknownTypeMeta  = 1 // runtime.Unknown.typeMeta
	fieldUnknownRaw       = 2 // runtime.Unknown.raw
	fieldTypeMetaKind     = 2 // runtime.TypeMeta.kind
	fieldSecretMetadata   = 1 // Secret.metadata
	fieldSecretData       = 2 // Secret.data map<string, bytes>
	fieldSecretStringData = 4 // Secret.stringData map<string, string>
	fieldListItems        = 2 // SecretList.items
	fieldObjectMetaAnnot  = 12
	fieldMapKey           = 1
	fieldMapValue         = 2
)

// protoEventSpans finds Secret values in a protobuf WatchEvent.
func protoEventSpans(b []byte) []span {
	var spans []span
	forFields(b, 0, func(num protowire.Number, vs, ve int) {
		if num != fieldWatchEventObject {
			return
		}
		forFields(b[:ve], vs, func(num protowire.Number, rs, re int) {
			if num == fieldRawExtensionRaw {
				if sp, ok := protoObjectSpans(b[:re][rs:]); ok {
					for _, s := range sp {
						spans = append(spans, span{start: rs + s.start, end: rs + s.end})
					}
				}
			}
		})
	})
	return spans
}

// protoObjectSpans finds Secret values in a "k8s\x00"-prefixed
// runtime.Unknown envelope holding a Secret or SecretList.
func protoObjectSpans(b []byte) ([]span, bool) {
	if !bytes.HasPrefix(b, protoMagic) {
		return nil, false
	}
	var kind string
	rawS, rawE := -1, -1
	ok := forFields(b, len(protoMagic), func(num protowire.Number, vs, ve int) {
		switch num {
		case fieldUnknownTypeMeta:
			forFields(b[:ve], vs, func(n protowire.Number, ks, ke int) {
				if n == fieldTypeMetaKind {
					kind = string(b[ks:ke])
				}
			})
		case fieldUnknownRaw:
			rawS, rawE = vs, ve
		}
	})
	if !ok || rawS < 0 {
		return nil, false
	}
	var spans []span
	switch kind {
	case "Secret":
		secretProto(b[:rawE], rawS, &spans)
	case "SecretList":
		forFields(b[:rawE], rawS, func(n protowire.Number, is, ie int) {
			if n == fieldListItems {
				secretProto(b[:ie], is, &spans)
			}
		})
	default:
		return nil, true
	}
	return spans, true
}

// secretProto adds the spans of a Secret message's values in b[i:].
func secretProto(b []byte, i int, spans *[]span) {
	forFields(b, i, func(num protowire.Number, vs, ve int) {
		switch num {
		case fieldSecretData, fieldSecretStringData:
			forFields(b[:ve], vs, func(n protowire.Number, s, e int) {
				if n == fieldMapValue {
					*spans = append(*spans, span{start: s, end: e})
				}
			})
		case fieldSecretMetadata:
			forFields(b[:ve], vs, func(n protowire.Number, s, e int) {
				if n != fieldObjectMetaAnnot {
					return
				}
				var key string
				vs2, ve2 := -1, -1
				forFields(b[:e], s, func(n protowire.Number, s2, e2 int) {
					switch n {
					case fieldMapKey:
						key = string(b[s2:e2])
					case fieldMapValue:
						vs2, ve2 = s2, e2
					}
				})
				if key == lastApplied && vs2 >= 0 {
					*spans = append(*spans, span{start: vs2, end: ve2})
				}
			})
		}
	})
}

// forFields calls fn with the span of every length-delimited field of the
// message b[i:], skipping other wire types. It reports whether the message
// parsed completely.
func forFields(b []byte, i int, fn func(num protowire.Number, vs, ve int)) bool {
	for i < len(b) {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return false
		}
		i += n
		if typ == protowire.BytesType {
			l, m := protowire.ConsumeVarint(b[i:])
			if m < 0 || l > uint64(len(b)-i-m) {
				return false
			}
			vs := i + m
			ve := vs + int(l)
			fn(num, vs, ve)
			i = ve
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i:])
		if m < 0 {
			return false
		}
		i += m
	}
	return true
}
