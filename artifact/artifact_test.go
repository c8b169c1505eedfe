package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"github.com/wtrace/wtrace/testkit/wttest"
)

var update = flag.Bool("update", false, "rewrite testdata/manifest.golden.json")

// startRegistry runs go-containerregistry's registry on 127.0.0.1, its
// blobs on disk; wrap, if set, sits in front of it. It returns the
// registry's host:port.
func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())), registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestPushPull: a session pushed to a registry is an OCI artifact as
// ORAS writes one (the manifest is the golden file's: artifactType, the
// empty config, one layer of the session's media type with its file
// name, the session's annotations), pushing it again gives the same
// digest, and pulling it by tag or by digest gives the file back byte for
// byte.
func TestPushPull(t *testing.T) {
	reg := startRegistry(t, nil)
	session := wttest.RecordCorpus(t, "basic-json", false)
	ctx := context.Background()
	ref := reg + "/sessions/basic:v1"
	res, err := Push(ctx, session, ref, PushOptions{})
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	again, err := Push(ctx, session, "oci://"+ref, PushOptions{})
	if err != nil || again.Reference != res.Reference {
		t.Errorf("Push again: %v, %v; want the same manifest %s", again.Reference, err, res.Reference)
	}
	if res.Digest != "sha256:"+sha(t, session) || !strings.HasPrefix(res.Reference, reg+"/sessions/basic@sha256:") {
		t.Errorf("Push = %+v", res)
	}

	desc, err := remote.Get(mustName(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "manifest.golden.json")
	got, _ := json.MarshalIndent(m, "", "  ")
	// The layer's digest and size are the recording's: masked.
	got = regexp.MustCompile(`("digest": "sha256:)[0-9a-f]{64}("\s*,\s*"mediaType": "`+regexp.QuoteMeta(MediaType)+`")`).ReplaceAll(got, []byte("${1}LAYER${2}"))
	got = regexp.MustCompile(`("size": )\d+(\s*\}\s*\],)`).ReplaceAll(got, []byte("${1}0${2}"))
	got = regexp.MustCompile(`("org.opencontainers.image.created": ")[^"]+`).ReplaceAll(got, []byte("${1}CREATED"))
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./artifact -update)", err)
	}
	if string(want) != string(got)+"\n" {
		t.Errorf("manifest:\n%s\nwant (%s):\n%s", got, golden, want)
	}

	for _, r := range []string{ref, "oci://" + ref, res.Reference} {
		out := filepath.Join(t.TempDir(), "pulled.wt")
		p, err := Pull(ctx, r, out, Options{})
		if err != nil {
			t.Fatalf("Pull(%s): %v", r, err)
		}
		if sha(t, out) != sha(t, session) || p.Digest != res.Digest || p.Reference != res.Reference || p.Annotations[AnnotationSource] != "pcap" {
			t.Errorf("Pull(%s) = %+v; the file differs or the result does", r, p)
		}
	}
}

func mustName(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := ParseReference(ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPullRefuses: what is not a session artifact, is too large, or does
// not match its digest leaves nothing at the path (or what it held).
func TestPullRefuses(t *testing.T) {
	corrupt := false
	reg := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if corrupt && r.Method == "GET" && strings.Contains(r.URL.Path, "/blobs/") {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				b := rec.Body.Bytes()
				if len(b) > 100 {
					b[100] ^= 1
				}
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				w.Write(b)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	session := wttest.RecordCorpus(t, "basic-json", false)
	ctx := context.Background()
	if _, err := Push(ctx, session, reg+"/s:ok", PushOptions{}); err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(1024, 1)
	if err := remote.Write(mustName(t, reg+"/s:image"), img); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	held := filepath.Join(dir, "held.wt")
	os.WriteFile(held, []byte("what the path held"), 0o644)
	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v; want %v", name, err, want)
		}
		if b, _ := os.ReadFile(held); string(b) != "what the path held" {
			t.Errorf("%s: the path now holds %d bytes; want what it held", name, len(b))
		}
		if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
			t.Errorf("%s: left %v", name, m)
		}
	}
	_, err := Pull(ctx, reg+"/s:image", held, Options{})
	check("an image", err, ErrNotSession)
	_, err = Pull(ctx, reg+"/s:ok", held, Options{MaxSize: 1000})
	check("over MaxSize", err, ErrTooLarge)
	_, err = Pull(ctx, reg+"/s:nothing", held, Options{})
	if err == nil {
		t.Error("Pull of a tag that does not exist: no error")
	}
	corrupt = true
	_, err = Pull(ctx, reg+"/s:ok", held, Options{})
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a blob that does not match its digest: %v", err)
	}
	check("a corrupt blob", nil, nil)
}

// TestPushRefusesUnredacted: a session recorded with --keep-secrets is
// pushed only when asked.
func TestPushRefusesUnredacted(t *testing.T) {
	reg := startRegistry(t, nil)
	kept := wttest.RecordCorpus(t, "basic-json", true)
	if _, err := Push(context.Background(), kept, reg+"/s:kept", PushOptions{}); !errors.Is(err, ErrUnredacted) {
		t.Errorf("Push of an unredacted session: %v; want ErrUnredacted", err)
	}
	res, err := Push(context.Background(), kept, reg+"/s:kept", PushOptions{AllowUnredacted: true})
	if err != nil || res.Annotations[AnnotationRedaction] != "headers-only" {
		t.Errorf("Push with AllowUnredacted: %+v, %v", res, err)
	}
	notSession := filepath.Join(t.TempDir(), "x.wt")
	os.WriteFile(notSession, []byte("hello"), 0o644)
	if _, err := Push(context.Background(), notSession, reg+"/s:x", PushOptions{}); !errors.Is(err, ErrNotSession) {
		t.Errorf("Push of a file that is no session: %v", err)
	}
}

// TestPullORAS: an artifact as `oras push REF session.wt:MEDIATYPE
// --artifact-type ARTIFACTTYPE` writes it (its manifest, byte for byte
// as ORAS 1.2 lays it out) is pulled.
func TestPullORAS(t *testing.T) {
	reg := startRegistry(t, nil)
	session := wttest.RecordCorpus(t, "basic-json", false)
	b, _ := os.ReadFile(session)
	layer := static.NewLayer(b, MediaType)
	ref := mustName(t, reg+"/oras/s:v1")
	for _, l := range []v1.Layer{layer, static.NewLayer(emptyJSON, emptyType)} {
		if err := remote.WriteLayer(ref.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := layer.Digest()
	manifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"%s","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2,"data":"e30="},"layers":[{"mediaType":"%s","digest":"%s","size":%d,"annotations":{"org.opencontainers.image.title":"session.wt"}}],"annotations":{"org.opencontainers.image.created":"2026-12-02T03:00:00Z"}}`,
		ArtifactType, MediaType, d, len(b))
	if err := remote.Put(ref, rawManifest(manifest)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "s.wt")
	if _, err := Pull(context.Background(), ref.String(), out, Options{}); err != nil {
		t.Fatalf("Pull of ORAS's artifact: %v", err)
	}
	if sha(t, out) != sha(t, session) {
		t.Error("the pulled file differs")
	}
}

// TestFetch: a session over HTTP, checked against the digest its URL
// names; a wrong digest, a 404 or bytes that are not a session leave
// nothing.
func TestFetch(t *testing.T) {
	session := wttest.RecordCorpus(t, "basic-json", false)
	b, _ := os.ReadFile(session)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/s.wt":
			w.Write(b)
		case "/junk.wt":
			w.Write(bytes.Repeat([]byte("x"), 1000))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "s.wt")
	res, err := Fetch(ctx, srv.URL+"/s.wt#sha256="+sha(t, session), out, Options{})
	if err != nil || sha(t, out) != sha(t, session) || res.Size != int64(len(b)) {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	for _, tc := range []struct{ src, want string }{
		{srv.URL + "/s.wt#sha256=" + strings.Repeat("0", 64), "want 0000"},
		{srv.URL + "/nope.wt", "404"},
		{srv.URL + "/junk.wt", "not a wtrace session"},
		{"ftp://x/s.wt", "want oci://REF"},
	} {
		other := filepath.Join(dir, "other.wt")
		if _, err := Fetch(ctx, tc.src, other, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Fetch(%s): %v; want an error saying %q", tc.src, err, tc.want)
		}
		if _, err := os.Stat(other); err == nil {
			t.Errorf("Fetch(%s) left a file", tc.src)
		}
	}
	if !IsRemote("oci://r/s:1") || !IsRemote(srv.URL) || IsRemote("s.wt") || IsRemote("/data/oci://x") {
		t.Error("IsRemote")
	}
}
