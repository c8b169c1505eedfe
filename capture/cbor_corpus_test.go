package capture

import (
	"bytes"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// TestRedactCBOR records the cbor-informer capture (client-go informers
// and a Secret written and read in CBOR, from a real apiserver) with and
// without redaction. Redacted, no Secret value of any kept event or body
// is stored anywhere; every event keeps its length, and the Secret events
// still decode (apimachinery's CBOR decoder) to Secrets with the same
// keys; the other events are untouched.
func TestRedactCBOR(t *testing.T) {
	dir := filepath.Join("..", "testdata", "corpus", "cbor-informer")
	keys := keyLogIn(t, dir)
	kept, _ := recordFile(t, filepath.Join(dir, "capture.pcap"), Options{KeepSecrets: true, KeyLog: keys})
	red, _ := recordFile(t, filepath.Join(dir, "capture.pcap"), Options{KeyLog: keys})
	frames := func(recs []formats.Record) []*formats.Frame {
		var out []*formats.Frame
		for _, r := range recs {
			if f, ok := r.(*formats.Frame); ok {
				out = append(out, f)
			}
		}
		return out
	}
	kf, rf := frames(kept.recs), frames(red.recs)
	if len(kf) != len(rf) || len(kf) == 0 {
		t.Fatalf("%d frames redacted, %d kept", len(rf), len(kf))
	}
	secretOf := func(data []byte) (*corev1.Secret, string) {
		var we metav1.WatchEvent
		if err := direct.Unmarshal(data, &we); err != nil {
			t.Fatalf("decode event: %v", err)
		}
		var s corev1.Secret
		if err := direct.Unmarshal(we.Object.Raw, &s); err != nil {
			t.Fatalf("decode %s object: %v", we.Type, err)
		}
		return &s, we.Type
	}
	var values [][]byte
	secrets := 0
	for i := range kf {
		m, err := frame.Peek(frame.CBOR, kf[i].Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(rf[i].Data) != len(kf[i].Data) || !bytes.Equal(rf[i].Pre, kf[i].Pre) {
			t.Fatalf("frame %d: %d bytes redacted, %d kept", i, len(rf[i].Data), len(kf[i].Data))
		}
		if m.Kind != "Secret" || m.Type == "BOOKMARK" {
			if !bytes.Equal(kf[i].Data, rf[i].Data) {
				t.Errorf("frame %d (%s %s) changed by redaction", i, m.Type, m.Kind)
			}
			continue
		}
		secrets++
		ks, _ := secretOf(kf[i].Data)
		rs, _ := secretOf(rf[i].Data)
		if len(ks.Data) == 0 || len(rs.Data) != len(ks.Data) || len(rf[i].Redacted) == 0 {
			t.Fatalf("frame %d: %d values kept, %d redacted, %d reported", i, len(ks.Data), len(rs.Data), len(rf[i].Redacted))
		}
		for k, v := range ks.Data {
			if len(rs.Data[k]) != len(v) || bytes.Equal(rs.Data[k], v) {
				t.Errorf("frame %d: data.%s = %q redacted to %q", i, k, v, rs.Data[k])
			}
			if len(v) >= 8 {
				values = append(values, v)
			}
		}
	}
	// The Secret the dynamic client wrote and read in CBOR bodies.
	for _, r := range kept.recs {
		if b, ok := r.(*formats.Body); ok && bytes.Contains(b.Data, []byte("mkcorpus-throwaway-cbor-password")) {
			values = append(values, []byte("mkcorpus-throwaway-cbor-password-1"), []byte("mkcorpus-throwaway-cbor-password-2"))
			break
		}
	}
	if secrets == 0 || len(values) < 3 {
		t.Fatalf("%d Secret events, %d values: the capture lacks what this test checks", secrets, len(values))
	}
	for _, r := range red.recs {
		var b []byte
		switch v := r.(type) {
		case *formats.Frame:
			b = v.Data
		case *formats.Body:
			b = v.Data
		case *formats.End:
			b = v.Tail
		}
		for _, v := range values {
			if len(b) > 0 && bytes.Contains(b, v) {
				t.Fatalf("secret value %q stored in a %T", v, r)
			}
		}
	}
	t.Logf("%d CBOR Secret events redacted, %d values checked", secrets, len(values))
}
