package codec_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// FuzzNegotiate feeds arbitrary Accept headers (a client's bytes) to the
// negotiation: it never panics, and either picks a media type or answers
// with a 406 (or, for Table options, 400) Status.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{
		"", "*/*", "application/json", "application/vnd.kubernetes.protobuf, */*",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
		"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
		"text/plain;q=0.1, application/yaml;q=0", ";;;,,/", "a/b/c;x=y=z",
	} {
		f.Add(s, uint8(0))
	}
	gvks := []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "example.com", Version: "v1", Kind: "Widget"}}
	f.Fuzz(func(t *testing.T, accept string, which uint8) {
		target := codec.Target(which % 3)
		m, err := codec.Negotiate(accept, target, gvks[int(which/3)%2])
		if err != nil {
			if st := codec.StatusOf(err); st.Code != 406 && st.Code != 400 {
				t.Fatalf("Negotiate(%q) = %v", accept, err)
			}
			return
		}
		if m.ContentType(target) == "" {
			t.Fatalf("Negotiate(%q) = %+v without a Content-Type", accept, m)
		}
		_ = codec.StatusMedia(accept)
	})
}

// FuzzDecodeBody feeds arbitrary request bodies (JSON, YAML, protobuf) to
// the decoder of creates and updates: it never panics and refuses what it
// cannot decode with a 400 Status.
func FuzzDecodeBody(f *testing.F) {
	f.Add(uint8(0), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`))
	f.Add(uint8(1), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"))
	f.Add(uint8(2), []byte("k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x05\n\x03\n\x01a\x1a\x00\"\x00"))
	f.Add(uint8(0), []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":[1,2,{}]}`))
	f.Add(uint8(0), []byte(`{"kind":"Secret"`))
	media := []string{codec.MediaJSON, codec.MediaYAML, codec.MediaProtobuf}
	gvks := []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "example.com", Version: "v1", Kind: "Widget"}}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		obj, err := codec.DecodeBody(media[int(which)%3], body, gvks[int(which/3)%2])
		if err != nil {
			if st := codec.StatusOf(err); st.Code != 400 {
				t.Fatalf("DecodeBody = %v", err)
			}
			return
		}
		if _, err := codec.Encode(obj, 1); err != nil {
			t.Fatalf("Encode of a decoded body: %v", err)
		}
	})
}

// FuzzDecodeCBOR feeds arbitrary bytes as a recorded CBOR body (a session
// file is untrusted input) to the CBOR reader and decoder: it never
// panics; what it decodes encodes as JSON.
func FuzzDecodeCBOR(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "frame", "testdata", "cbor-informer-list.body")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("\xd9\xd9\xf7\xa2DkindIConfigMapJapiVersionBv1"))
	f.Add([]byte("\xd9\xd9\xf7\xa3DkindFSecretJapiVersionBv1Ddata\xa1Aa\x41\x00"))
	f.Add([]byte("\xa2DkindFWidgetJapiVersionNexample.com/v1"))
	f.Add([]byte("\xd9\xd9\xf7\xbf\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := codec.FromBody(frame.CBOR, body)
		if err != nil {
			return
		}
		obj, err := codec.Decode(o)
		if err != nil {
			return
		}
		if _, err := codec.Encode(obj, frame.JSON); err != nil {
			t.Logf("Encode of a decoded CBOR body: %v", err) // a decoded object need not be valid
		}
	})
}
