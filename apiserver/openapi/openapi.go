// Package openapi holds kube-apiserver v1.33's OpenAPI documents of the
// built-in API groups — the v3 index (/openapi/v3), the document of each
// group version it names, and the v2 document (JSON, and protobuf) — as
// the apiserver serves them, so that a replay whose session did not record them still gives
// kubectl what it validates with (kubectl apply, edit, explain) and what
// tells it that the server validates fields itself (fieldValidation).
//
// The documents are copied from a real apiserver by tools/mkopenapi and
// embedded zstd'd (about 0.8 MB); they are decompressed on first use,
// one at a time.
package openapi

import (
	"embed"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

//go:embed docs/*.json.zst docs/v2.pb.zst
var docs embed.FS

// V2Protobuf is the media type a client asks for the v2 document in
// protobuf with (kubectl, when a kind is not in the v3 documents: its
// fallback validation), and V2ProtobufType the Content-Type the apiserver
// answers it with.
const (
	V2Protobuf     = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	V2ProtobufType = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// maxDoc bounds one decompressed document (the largest, v2, is about 2 MB).
const maxDoc = 16 << 20

var (
	decoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDoc))
	})
	cacheMu sync.Mutex
	cache   = map[string][]byte{}
)

// Doc returns the JSON document the apiserver serves at path (the query,
// such as v3's ?hash=, left out): "/openapi/v2", "/openapi/v3",
// "/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1", … ok is false for a
// path it does not hold. The caller must not change the bytes.
func Doc(path string) (b []byte, ok bool) {
	path, _, _ = strings.Cut(path, "?")
	var name string
	switch {
	case path == "/openapi/v2":
		name = "v2"
	case path == "/openapi/v3":
		name = "v3"
	case strings.HasPrefix(path, "/openapi/v3/"):
		rest := strings.Trim(strings.TrimPrefix(path, "/openapi/v3/"), "/")
		if rest == "" || strings.Contains(rest, "..") || strings.Contains(rest, "_") {
			return nil, false
		}
		name = "v3-" + strings.ReplaceAll(rest, "/", "_")
	default:
		return nil, false
	}
	return load(name + ".json.zst")
}

// DocProtobuf returns the v2 document in protobuf (V2Protobuf), as the
// apiserver serves it to a client that asks for it. The caller must not
// change the bytes.
func DocProtobuf() ([]byte, bool) { return load("v2.pb.zst") }

// load decompresses an embedded document (once).
func load(name string) ([]byte, bool) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if b, ok := cache[name]; ok {
		return b, true
	}
	z, err := docs.ReadFile("docs/" + name)
	if err != nil {
		return nil, false
	}
	d, err := decoder()
	if err != nil {
		return nil, false
	}
	b, err := d.DecodeAll(z, nil)
	if err != nil {
		return nil, false
	}
	cache[name] = b
	return b, true
}
