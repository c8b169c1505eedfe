package capture

import (
	"bytes"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
)

// notFound is kube-apiserver v1.33's answer to a watch of a resource it
// does not serve, as protobuf: a Status of 116 bytes.
func notFound(t *testing.T) []byte {
	t.Helper()
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: "the server could not find the requested resource", Reason: metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{}, Code: 404}
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(st, &b); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 116 {
		t.Fatalf("the Status encodes to %d bytes; the apiserver's has 116", b.Len())
	}
	return b.Bytes()
}

// TestWatchErrorAnswer: an error answer to a watch request is one opaque
// body, whatever the request asked (issue 34): its status and media type
// say it is no stream of events (frame.ResponseFormat). A 200 answer in a
// watch's media type is split into events.
func TestWatchErrorAnswer(t *testing.T) {
	pb := notFound(t)
	const watch = "GET /apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies?watch=true HTTP/1.1\r\nHost: x\r\nAccept: application/vnd.kubernetes.protobuf\r\n\r\n"
	js := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}` + "\n"
	for _, tc := range []struct {
		name, head string
		body       []byte
		events     frame.Format
	}{
		{"protobuf 404", "HTTP/1.1 404 Not Found\r\nContent-Type: application/vnd.kubernetes.protobuf\r\nContent-Length: %d\r\n\r\n", pb, frame.Unknown},
		{"json 404", "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", []byte(js), frame.Unknown},
		{"protobuf 200 without stream=watch", "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf\r\nContent-Length: %d\r\n\r\n", pb, frame.Unknown},
		{"protobuf 403 stream=watch", "HTTP/1.1 403 Forbidden\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\nContent-Length: %d\r\n\r\n", pb, frame.Unknown},
		{"json 200 watch", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", []byte(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}}` + "\n"), frame.JSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := runH1([]step{toServer(watch), toClient(fmt.Sprintf(tc.head, len(tc.body)) + string(tc.body))}, 7, formats.EndTruncated)
			var body []byte
			frames := 0
			for _, r := range recs {
				switch r := r.(type) {
				case *formats.Response:
					if r.Events != tc.events {
						t.Errorf("response events %v; want %v", r.Events, tc.events)
					}
				case *formats.Body:
					body = append(body, r.Data...)
				case *formats.Frame:
					frames++
				case *formats.Anomaly:
					t.Errorf("anomaly %s: %s", r.Kind, r.Message)
				}
			}
			if tc.events == frame.Unknown && (!bytes.Equal(body, tc.body) || frames != 0) {
				t.Errorf("%d frames, body %q; want the %d bytes sent", frames, body, len(tc.body))
			}
			if tc.events != frame.Unknown && frames != 1 {
				t.Errorf("%d frames; want 1", frames)
			}
		})
	}
}
