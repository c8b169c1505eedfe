package codec_test

import (
	"testing"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// benchEvent encodes corpus objects as watch events for a client asking
// for accept.
func benchEvent(b *testing.B, scenario, accept string) {
	objs := corpusObjects(b, scenario)
	m, err := codec.Negotiate(accept, codec.TargetWatch, configMapGVK)
	if err != nil {
		b.Fatal(err)
	}
	w := codec.NewWriter(m, codec.TableOptions{}, nil)
	var size int64
	for _, o := range objs {
		size += int64(len(o.obj.Raw))
	}
	b.SetBytes(size / int64(len(objs)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := w.Event("MODIFIED", objs[i%len(objs)].obj); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkEventPassthrough: a recorded JSON event to a JSON client.
func BenchmarkEventPassthrough(b *testing.B) { benchEvent(b, "basic-json", "application/json") }

// BenchmarkTranscodeProtobufToJSON: a recorded protobuf event to a JSON
// client (a dynamic informer).
func BenchmarkTranscodeProtobufToJSON(b *testing.B) { benchEvent(b, "protobuf", "application/json") }

// BenchmarkTranscodeJSONToProtobuf: a recorded JSON event to a protobuf
// client (a typed informer).
func BenchmarkTranscodeJSONToProtobuf(b *testing.B) {
	benchEvent(b, "basic-json", "application/vnd.kubernetes.protobuf;stream=watch")
}

// BenchmarkTableEvent: a recorded event as a Table row (kubectl get -w).
func BenchmarkTableEvent(b *testing.B) {
	benchEvent(b, "basic-json", "application/json;as=Table;v=v1;g=meta.k8s.io")
}

// BenchmarkPartialEvent: a recorded protobuf event as protobuf
// PartialObjectMetadata (a metadata-only informer).
func BenchmarkPartialEvent(b *testing.B) {
	benchEvent(b, "protobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
}

// BenchmarkTranscodeCBORToJSON: a recorded CBOR event (cbor-informer, a
// real apiserver with CBORServingAndStorage) to a JSON client.
func BenchmarkTranscodeCBORToJSON(b *testing.B) { benchEvent(b, "cbor-informer", "application/json") }

// BenchmarkTranscodeCBORToProtobuf: a recorded CBOR event to a protobuf
// client (a typed informer).
func BenchmarkTranscodeCBORToProtobuf(b *testing.B) {
	benchEvent(b, "cbor-informer", "application/vnd.kubernetes.protobuf;stream=watch")
}
