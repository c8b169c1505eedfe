package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/outfile"
)

const (
	// ArtifactType is the artifactType of a session's manifest.
	ArtifactType = "application/vnd.wtrace.session.v1"
	// MediaType is the media type of the layer that holds the session
	// file, byte for byte.
	MediaType = "application/vnd.wtrace.session.v1.wt"

	// Annotations of the manifest: what the session says of itself.
	AnnotationSource    = "io.wtrace.session.source"    // formats.Meta.Source: pcap, iface, proxy, replay
	AnnotationRedaction = "io.wtrace.session.redaction" // formats.Meta.Redaction
	AnnotationTool      = "io.wtrace.session.tool"      // formats.Meta.Tool: the recorder
	AnnotationEvents    = "io.wtrace.session.events"    // its watch events, from the index

	annotationTitle       = "org.opencontainers.image.title"
	annotationCreated     = "org.opencontainers.image.created"
	annotationDescription = "org.opencontainers.image.description"

	// emptyType is the OCI empty descriptor's media type (image-spec
	// v1.1, "Guidance for an empty descriptor"): the config of an
	// artifact that needs none, the two bytes "{}".
	emptyType = "application/vnd.oci.empty.v1+json"

	// DefaultMaxSize is the Options.MaxSize a zero value means: well
	// above the longest sessions measured (1.3 GiB for hours of a busy
	// controller), well below a node's disk.
	DefaultMaxSize = 64 << 30
	// maxManifest bounds the manifest Pull reads: a session's is under
	// 1 KiB; OCI registries refuse manifests over 4 MiB.
	maxManifest = 4 << 20
)

var emptyJSON = []byte("{}")

// Errors callers branch on.
var (
	// ErrNotSession: the reference names no session artifact (no layer of
	// MediaType, or several), or the bytes fetched are not a session file.
	ErrNotSession = errors.New("artifact: not a wtrace session")
	// ErrTooLarge: the session is larger than Options.MaxSize.
	ErrTooLarge = errors.New("artifact: the session is larger than the limit")
	// ErrUnredacted: Push of a session that kept Secret values.
	ErrUnredacted = errors.New("artifact: the session keeps Secret values (recorded with --keep-secrets)")
)

// Options configure a push, pull or fetch. The zero value uses the Docker
// configuration's credentials, HTTPS (plain HTTP on loopback and private
// addresses) and DefaultMaxSize.
type Options struct {
	// PlainHTTP speaks plain HTTP to the registry (a registry inside a
	// cluster without TLS, say).
	PlainHTTP bool
	// Keychain gives the registry's credentials; nil means
	// authn.DefaultKeychain ($DOCKER_CONFIG/config.json, credential
	// helpers included).
	Keychain authn.Keychain
	// Transport carries the requests; nil means remote.DefaultTransport
	// (http.DefaultTransport for a fetch).
	Transport http.RoundTripper
	// MaxSize bounds the session a pull or fetch writes; 0 means
	// DefaultMaxSize.
	MaxSize int64
	// UserAgent is sent with every request ("wtrace v0.4.0").
	UserAgent string
}

func (o Options) maxSize() int64 {
	if o.MaxSize <= 0 {
		return DefaultMaxSize
	}
	return o.MaxSize
}

func (o Options) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		ro = append(ro, remote.WithTransport(o.Transport))
	}
	if o.UserAgent != "" {
		ro = append(ro, remote.WithUserAgent(o.UserAgent))
	}
	return ro
}

// ParseReference reads a registry reference (registry/repository:tag or
// @sha256:…), with or without the oci:// of a source.
func ParseReference(ref string, opts Options) (name.Reference, error) {
	ref = strings.TrimPrefix(ref, SchemeOCI)
	var no []name.Option
	if opts.PlainHTTP {
		no = append(no, name.Insecure)
	}
	r, err := name.ParseReference(ref, no...)
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	return r, nil
}

// PushOptions configure Push.
type PushOptions struct {
	Options
	// AllowUnredacted pushes a session whose Secret values were kept.
	AllowUnredacted bool
}

// Result says what was pushed, pulled or fetched.
type Result struct {
	// Reference names the manifest by its digest
	// (registry/repository@sha256:…); "" for a fetch.
	Reference string
	// Digest is the session file's ("sha256:…"), Size its bytes.
	Digest string
	Size   int64
	// Annotations are the manifest's (nil for a fetch).
	Annotations map[string]string
}

// Push uploads the session file at path to the registry as an artifact
// (see the package doc) and tags it ref. It reads the file twice (its
// index, then its digest) before uploading it, streamed.
func Push(ctx context.Context, path, ref string, opts PushOptions) (Result, error) {
	r, err := ParseReference(ref, opts.Options)
	if err != nil {
		return Result{}, err
	}
	anns, err := sessionAnnotations(path, opts.AllowUnredacted)
	if err != nil {
		return Result{}, err
	}
	digest, size, err := hashFile(path)
	if err != nil {
		return Result{}, err
	}
	layer, err := partial.CompressedToLayer(&fileLayer{path: path, digest: digest, size: size})
	if err != nil {
		return Result{}, err
	}
	ro := opts.remote(ctx)
	repo := r.Context()
	if err := remote.WriteLayer(repo, static.NewLayer(emptyJSON, emptyType), ro...); err != nil {
		return Result{}, fmt.Errorf("artifact: pushing the config to %s: %w", repo, err)
	}
	if err := remote.WriteLayer(repo, layer, ro...); err != nil {
		return Result{}, fmt.Errorf("artifact: pushing %s to %s: %w", path, repo, err)
	}
	emptyDigest, _, _ := v1.SHA256(bytes.NewReader(emptyJSON))
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Config:        v1.Descriptor{MediaType: emptyType, Size: int64(len(emptyJSON)), Digest: emptyDigest, Data: emptyJSON},
		Layers: []v1.Descriptor{{MediaType: MediaType, Size: size, Digest: digest,
			Annotations: map[string]string{annotationTitle: filepath.Base(path)}}},
		Annotations: anns,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return Result{}, err
	}
	if err := remote.Put(r, rawManifest(raw), ro...); err != nil {
		return Result{}, fmt.Errorf("artifact: pushing the manifest to %s: %w", r, err)
	}
	md, _, _ := v1.SHA256(bytes.NewReader(raw))
	return Result{Reference: repo.Digest(md.String()).String(), Digest: digest.String(), Size: size, Annotations: anns}, nil
}

// sessionAnnotations reads what a session says of itself, and refuses a
// session that kept Secret values unless allowed.
func sessionAnnotations(path string, allowUnredacted bool) (map[string]string, error) {
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		if errors.Is(err, formats.ErrNotSession) {
			return nil, fmt.Errorf("%w: %s", ErrNotSession, path)
		}
		return nil, fmt.Errorf("artifact: %w", err)
	}
	defer f.Close()
	idx := f.Index()
	var events int64
	for _, x := range idx.Exchanges {
		events += x.Frames
	}
	anns := map[string]string{AnnotationEvents: strconv.FormatInt(events, 10)}
	if m := idx.Meta; m != nil {
		if m.Redaction == formats.RedactionHeadersOnly && !allowUnredacted {
			return nil, fmt.Errorf("%w: %s", ErrUnredacted, path)
		}
		anns[AnnotationSource] = m.Source
		anns[AnnotationRedaction] = m.Redaction
		anns[AnnotationTool] = m.Tool
		if m.Description != "" {
			anns[annotationDescription] = m.Description
		}
		if m.Recorded != 0 {
			anns[annotationCreated] = time.Unix(0, m.Recorded).UTC().Format(time.RFC3339)
		}
	}
	return anns, nil
}

// Pull downloads the session artifact ref into a file at path (see the
// package doc: limits, digest, in place once complete).
func Pull(ctx context.Context, ref, path string, opts Options) (Result, error) {
	r, err := ParseReference(ref, opts)
	if err != nil {
		return Result{}, err
	}
	ro := opts.remote(ctx)
	desc, err := remote.Get(r, ro...)
	if err != nil {
		return Result{}, fmt.Errorf("artifact: %w", err)
	}
	if len(desc.Manifest) > maxManifest {
		return Result{}, fmt.Errorf("%w: %s: a manifest of %d bytes", ErrNotSession, r, len(desc.Manifest))
	}
	if !desc.MediaType.IsImage() {
		return Result{}, fmt.Errorf("%w: %s is a %s, not an artifact's manifest", ErrNotSession, r, desc.MediaType)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return Result{}, fmt.Errorf("artifact: %s: %w", r, err)
	}
	l, err := sessionLayer(m)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s", err, r)
	}
	if l.Size > opts.maxSize() {
		return Result{}, fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrTooLarge, r, l.Size, opts.maxSize())
	}
	layer, err := remote.Layer(r.Context().Digest(l.Digest.String()), ro...)
	if err != nil {
		return Result{}, fmt.Errorf("artifact: %w", err)
	}
	rc, err := layer.Compressed() // verified against the digest as it is read
	if err != nil {
		return Result{}, fmt.Errorf("artifact: %s: %w", r, err)
	}
	defer rc.Close()
	if err := writeSession(path, rc, l.Size, opts.maxSize(), nil); err != nil {
		return Result{}, fmt.Errorf("artifact: %s: %w", r, err)
	}
	return Result{Reference: r.Context().Digest(desc.Digest.String()).String(), Digest: l.Digest.String(), Size: l.Size, Annotations: m.Annotations}, nil
}

// sessionLayer finds the one layer of a session artifact.
func sessionLayer(m *v1.Manifest) (v1.Descriptor, error) {
	var found []v1.Descriptor
	for _, l := range m.Layers {
		if string(l.MediaType) == MediaType {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		return v1.Descriptor{}, fmt.Errorf("%w: %d layers of %s (artifactType %q)", ErrNotSession, len(found), MediaType, m.ArtifactType)
	}
	return found[0], nil
}

// writeSession streams r (size bytes, or -1 if unknown) into a file
// written beside path, checks that it is a session (and verify, if set,
// once everything was read), and puts it in place.
func writeSession(path string, r io.Reader, size, limit int64, verify func() error) error {
	f, err := outfile.Create(path)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	switch {
	case err != nil:
	case n > limit:
		err = fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)
	case size >= 0 && n != size:
		err = fmt.Errorf("%d bytes of %d: %w", n, size, io.ErrUnexpectedEOF)
	}
	if err == nil && verify != nil {
		err = verify()
	}
	if err == nil {
		err = checkSession(f.File)
	}
	if err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// checkSession checks that f holds a session file (its header, and an
// index or blocks a reader can read).
func checkSession(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	s, err := formats.OpenReaderAt(f, st.Size(), formats.ReaderOptions{})
	if errors.Is(err, formats.ErrNotSession) {
		return ErrNotSession
	}
	if err != nil {
		return err
	}
	return s.Close()
}

func hashFile(path string) (v1.Hash, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	defer f.Close()
	return v1.SHA256(f)
}

// fileLayer is a session file as a layer: read from disk for each
// upload, never held in memory.
type fileLayer struct {
	path   string
	digest v1.Hash
	size   int64
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return MediaType, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// rawManifest is a manifest to put as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Sources a replay takes besides a file (Fetch).
const (
	SchemeOCI   = "oci://"
	schemeHTTPS = "https://"
	schemeHTTP  = "http://"
)

// IsRemote reports whether source names a session to fetch (oci://REF,
// https://URL, http://URL) rather than a file.
func IsRemote(source string) bool {
	return strings.HasPrefix(source, SchemeOCI) || strings.HasPrefix(source, schemeHTTPS) || strings.HasPrefix(source, schemeHTTP)
}

// Fetch writes the session source names into a file at path: Pull for
// oci://REF, an HTTP GET for http(s)://URL (an object store, a presigned
// URL, an artifact server). A URL may end in #sha256=HEX, the digest the
// bytes must have. The same limits, checks and placement as Pull.
func Fetch(ctx context.Context, source, path string, opts Options) (Result, error) {
	if strings.HasPrefix(source, SchemeOCI) {
		return Pull(ctx, source, path, opts)
	}
	if !strings.HasPrefix(source, schemeHTTPS) && !strings.HasPrefix(source, schemeHTTP) {
		return Result{}, fmt.Errorf("artifact: %q: want oci://REF, https://URL or http://URL", source)
	}
	url, want, _ := strings.Cut(source, "#sha256=")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{}, fmt.Errorf("artifact: %w", err)
	}
	if opts.UserAgent != "" {
		req.Header.Set("User-Agent", opts.UserAgent)
	}
	c := &http.Client{Transport: opts.Transport}
	resp, err := c.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("artifact: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("artifact: GET %s: %s", url, resp.Status)
	}
	if resp.ContentLength > opts.maxSize() {
		return Result{}, fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrTooLarge, url, resp.ContentLength, opts.maxSize())
	}
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(resp.Body, h)}
	verify := func() error {
		if got := hex.EncodeToString(h.Sum(nil)); want != "" && !strings.EqualFold(want, got) {
			return fmt.Errorf("sha256 %s; want %s", got, want)
		}
		return nil
	}
	if err := writeSession(path, cr, resp.ContentLength, opts.maxSize(), verify); err != nil {
		return Result{}, fmt.Errorf("artifact: GET %s: %w", url, err)
	}
	return Result{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: cr.n}, nil
}
