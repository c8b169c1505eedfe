package wttest

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
)

// CorpusToken is the bearer token of the throwaway apiserver the corpus
// was captured from; it appears in the decrypted requests of tls-h2.
const CorpusToken = "corpus-admin-token-0123456789abcdef"

// MinNeedle is the shortest Secret value used as a needle.
const MinNeedle = 8

// maxBody bounds a decoded body held while grepping.
const maxBody = 256 << 20

// Needle is a value that must not appear in a session, with where it
// comes from (for failure messages).
type Needle struct {
	Value []byte
	From  string
}

var (
	corpusOnce    sync.Once
	corpusNeedles []Needle
	corpusErr     error
)

// RepoRoot returns the root of the wtrace module: the nearest directory
// above the working directory holding its go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/wtrace/wtrace\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("wttest: not inside the wtrace module")
		}
		dir = parent
	}
}

// CorpusNeedles returns the token and the Secret values of the corpus
// captures, computed once per test binary. A missing corpus is not an
// error: only the token is returned then.
func CorpusNeedles() ([]Needle, error) {
	corpusOnce.Do(func() {
		corpusNeedles = []Needle{{Value: []byte(CorpusToken), From: "corpus bearer token"}}
		root, err := RepoRoot()
		if err != nil {
			corpusErr = err
			return
		}
		seen := map[string]bool{}
		for _, sc := range []string{"multi-watch", "tls-h2"} {
			dir := filepath.Join(root, "testdata", "corpus", sc)
			if _, err := os.Stat(filepath.Join(dir, "capture.pcap")); err != nil {
				continue
			}
			vals, err := secretValues(dir)
			if err != nil {
				corpusErr = fmt.Errorf("wttest: %s: %w", sc, err)
				return
			}
			for _, v := range vals {
				if len(v.Value) >= MinNeedle && !seen[string(v.Value)] {
					seen[string(v.Value)] = true
					v.From = sc + ": " + v.From
					corpusNeedles = append(corpusNeedles, v)
				}
			}
		}
	})
	return corpusNeedles, corpusErr
}

// collector is a capture.Sink keeping what holds Secret values.
type collector struct {
	bodies map[[2]int64][]byte // exchange, dir → body
	enc    map[[2]int64]string
	vals   []Needle
}

func (c *collector) Write(r formats.Record) error {
	switch r := r.(type) {
	case *formats.Frame:
		c.object(r.Data, "watch event")
	case *formats.Body:
		k := [2]int64{r.Exchange, int64(r.Dir)}
		if len(c.bodies[k])+len(r.Data) <= maxBody {
			c.bodies[k] = append(c.bodies[k], r.Data...)
		}
	case *formats.Response:
		c.enc[[2]int64{r.Exchange, int64(formats.ServerToClient)}] = r.Encoding
	case *formats.Request:
		for _, h := range r.Header {
			if strings.EqualFold(h.Name, "Content-Encoding") {
				c.enc[[2]int64{r.Exchange, int64(formats.ClientToServer)}] = h.Value
			}
		}
	}
	return nil
}

// object collects the Secret values of a JSON watch event, Secret, or
// list of Secrets.
func (c *collector) object(b []byte, from string) {
	if !bytes.Contains(b, []byte(`"Secret`)) {
		return
	}
	var v struct {
		Kind       string            `json:"kind"`
		Data       map[string]string `json:"data"`
		StringData map[string]string `json:"stringData"`
		Object     json.RawMessage   `json:"object"`
		Items      []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	if len(v.Object) > 0 {
		c.object(v.Object, from)
	}
	for _, it := range v.Items {
		c.object(it, from)
	}
	if v.Kind != "Secret" && v.Kind != "" {
		return
	}
	for k, s := range v.Data {
		c.vals = append(c.vals, Needle{Value: []byte(s), From: from + " data." + k})
		if d, err := base64.StdEncoding.DecodeString(s); err == nil {
			c.vals = append(c.vals, Needle{Value: d, From: from + " data." + k + " (decoded)"})
		}
	}
	for k, s := range v.StringData {
		c.vals = append(c.vals, Needle{Value: []byte(s), From: from + " stringData." + k})
	}
}

// secretValues records dir/capture.pcap with redaction off and returns the
// Secret values it holds.
func secretValues(dir string) ([]Needle, error) {
	pcap := filepath.Join(dir, "capture.pcap")
	keys, err := KeyLogFor(pcap)
	if err != nil {
		return nil, err
	}
	in, err := os.Open(pcap)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	pc, err := capture.NewPcap(in, keys)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	c := &collector{bodies: map[[2]int64][]byte{}, enc: map[[2]int64]string{}}
	if _, err := pc.Record(context.Background(), c, capture.Options{KeepSecrets: true, KeyLog: keys}, nil); err != nil {
		return nil, err
	}
	for k, b := range c.bodies {
		if d, err := decode(c.enc[k], b); err == nil {
			c.object(d, "body")
		}
	}
	return c.vals, nil
}

// decode undoes a Content-Encoding (gzip, deflate) of a whole body.
func decode(enc string, b []byte) ([]byte, error) {
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return b, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	default:
		return nil, fmt.Errorf("unknown content encoding %q", enc)
	}
	return io.ReadAll(io.LimitReader(r, maxBody))
}

// Finding is a needle found in a session.
type Finding struct {
	Needle Needle
	Where  string // "exchange 3 response header Authorization", …
}

func (f Finding) String() string {
	return fmt.Sprintf("%s (%s) in %s", clip(f.Needle.Value), f.Needle.From, f.Where)
}

func clip(b []byte) string {
	if len(b) > 24 {
		return fmt.Sprintf("%q…", b[:24])
	}
	return fmt.Sprintf("%q", b)
}

// Find reads every record of the session at path and returns where any
// needle appears: header values, request targets, bodies (also after
// undoing their Content-Encoding), frames, chunk extensions, tails,
// trailers, notes and messages. Damaged regions are skipped.
func Find(path string, needles []Needle) ([]Finding, error) {
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Finding
	look := func(b []byte, where string) {
		if len(b) == 0 {
			return
		}
		for _, n := range needles {
			if len(n.Value) > 0 && bytes.Contains(b, n.Value) {
				out = append(out, Finding{Needle: n, Where: where})
			}
		}
	}
	headers := func(h []formats.Header, where string) {
		for _, f := range h {
			look([]byte(f.Value), where+" header "+f.Name)
		}
	}
	bodies := map[[2]int64][]byte{}
	enc := map[[2]int64]string{}
	for r, err := range f.Records().Intact(nil) {
		if err != nil {
			return out, err
		}
		switch r := r.(type) {
		case *formats.Meta:
			look([]byte(r.Description), "meta description")
			for k, v := range r.Labels {
				look([]byte(v), "meta label "+k)
			}
		case *formats.Request:
			w := fmt.Sprintf("exchange %d request", r.Exchange)
			look([]byte(r.Target), w+" target")
			headers(r.Header, w)
			for _, h := range r.Header {
				if strings.EqualFold(h.Name, "Content-Encoding") {
					enc[[2]int64{r.Exchange, 0}] = h.Value
				}
			}
		case *formats.Response:
			headers(r.Header, fmt.Sprintf("exchange %d response", r.Exchange))
			enc[[2]int64{r.Exchange, 1}] = r.Encoding
		case *formats.Frame:
			w := fmt.Sprintf("exchange %d event %d", r.Exchange, r.Seq)
			look(r.Pre, w)
			look(r.Data, w)
		case *formats.Body:
			look(r.Data, fmt.Sprintf("exchange %d %s body at %d", r.Exchange, r.Dir, r.Offset))
			k := [2]int64{r.Exchange, int64(r.Dir)}
			if len(bodies[k])+len(r.Data) <= maxBody {
				bodies[k] = append(bodies[k], r.Data...)
			}
		case *formats.Chunk:
			look([]byte(r.Ext), fmt.Sprintf("exchange %d chunk extension", r.Exchange))
		case *formats.End:
			w := fmt.Sprintf("exchange %d %s end", r.Exchange, r.Dir)
			look(r.Tail, w+" tail")
			headers(r.Trailer, w+" trailer")
			look([]byte(r.Note), w+" note")
			k := [2]int64{r.Exchange, int64(r.Dir)}
			if e := enc[k]; e != "" && len(bodies[k]) > 0 {
				if d, err := decode(e, bodies[k]); err == nil {
					look(d, fmt.Sprintf("exchange %d %s body (%s decoded)", r.Exchange, r.Dir, e))
				}
			}
			delete(bodies, k)
		case *formats.Anomaly:
			look([]byte(r.Message), fmt.Sprintf("anomaly of conn %d", r.Conn))
		case *formats.TLS:
			look([]byte(r.Note), fmt.Sprintf("conn %d TLS note", r.Conn))
		case *formats.Summary:
			look([]byte(r.Note), "summary note")
		}
	}
	return out, nil
}

// CheckNoSecrets fails t if the session at path holds the corpus token,
// a corpus Secret value, or any of extra (values the test itself put in
// Authorization headers, cookies or Secrets).
func CheckNoSecrets(t testing.TB, path string, extra ...string) {
	t.Helper()
	needles, err := CorpusNeedles()
	if err != nil {
		t.Fatalf("wttest: computing the corpus needles: %v", err)
	}
	for _, e := range extra {
		needles = append(needles, Needle{Value: []byte(e), From: "test value"})
	}
	found, err := Find(path, needles)
	if err != nil {
		t.Fatalf("wttest: reading %s: %v", path, err)
	}
	if len(found) == 0 {
		return
	}
	var lines []string
	for _, f := range found {
		lines = append(lines, "  "+f.String())
	}
	sort.Strings(lines)
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("  … and %d more", len(lines)-20))
	}
	t.Errorf("%s holds secrets that redaction should have removed:\n%s", path, strings.Join(lines, "\n"))
}
