package tape

import (
	"slices"
	"testing"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
)

// TestParseTarget: a query is the request as apipath.Parse reads it,
// with its resourceVersion "0" normalised to "" (both mean "no RV
// known"), keyed by what says which request it is.
func TestParseTarget(t *testing.T) {
	tests := []struct {
		method, target string
		watch          bool
		rv, rawRV      string
		sameKey        string
		otherKey       string
	}{
		{"GET", "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5&timeoutSeconds=30", true, "5", "5",
			"/api/v1/namespaces/a/configmaps?watch=1&allowWatchBookmarks=true&timeout=5m&resourceVersion=9",
			"/api/v1/namespaces/a/configmaps?resourceVersion=5"},
		{"GET", "/api/v1/namespaces/a/configmaps?resourceVersion=0&limit=500", false, "", "0",
			"/api/v1/namespaces/a/configmaps?continue=abc&resourceVersionMatch=NotOlderThan",
			"/api/v1/namespaces/a/configmaps?watch=true"},
		{"GET", "/api/v1/watch/namespaces/a/configmaps?labelSelector=app%3Dx", true, "", "",
			"/api/v1/namespaces/a/configmaps?watch=true&labelSelector=app%3Dx",
			"/api/v1/namespaces/a/configmaps?watch=true&labelSelector=app%3Dy"},
		{"GET", "/api/v1/namespaces/a/configmaps?watch=yes", true, "", "",
			"/api/v1/namespaces/a/configmaps?watch",
			"/api/v1/namespaces/a/configmaps?watch=false"},
		{"GET", "/api/v1/namespaces/a/configmaps/x?watch=1", false, "", "", // a GET of one object
			"/api/v1/namespaces/a/configmaps/x",
			"/api/v1/watch/namespaces/a/configmaps/x"},
		{"GET", "/a?%zz&b=1", false, "", "", "/a?b=1", "/a?b=2"}, // a pair that does not decode is left out
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			q, err := ParseTarget(tt.method, tt.target)
			if err != nil {
				t.Fatalf("ParseTarget(%q) = %v", tt.target, err)
			}
			if q.Watch != tt.watch || q.RV != tt.rv || q.ResourceVersion != tt.rawRV {
				t.Errorf("ParseTarget(%q) = watch %v, RV %q (as sent %q); want %v, %q (%q)", tt.target, q.Watch, q.RV, q.ResourceVersion, tt.watch, tt.rv, tt.rawRV)
			}
			same, _ := ParseTarget(tt.method, tt.sameKey)
			if same.Key != q.Key {
				t.Errorf("key(%q) = %q ≠ key(%q) = %q; want equal", tt.sameKey, same.Key, tt.target, q.Key)
			}
			other, _ := ParseTarget(tt.method, tt.otherKey)
			if other.Key == q.Key {
				t.Errorf("key(%q) = key(%q) = %q; want different", tt.otherKey, tt.target, q.Key)
			}
		})
	}
	for _, bad := range []string{"", "nopath", "/" + string(make([]byte, apipath.MaxTargetLen))} {
		if _, err := ParseTarget("GET", bad); err == nil {
			t.Errorf("ParseTarget(%.20q) = nil error; want one", bad)
		}
	}
}

func TestAcceptRank(t *testing.T) {
	const json, pb = "application/json", "application/vnd.kubernetes.protobuf"
	tests := []struct {
		accept, media string
		want          int
	}{
		{"", json, 2},
		{"", pb, 1},
		{"*/*", pb, 1},
		{"application/json, */*", json, 3},
		{"application/json, */*", pb, 1},
		{"application/vnd.kubernetes.protobuf, */*", pb, 3},
		{"application/vnd.kubernetes.protobuf;stream=watch", pb, 3},
		{"application/vnd.kubernetes.protobuf;stream=watch", json, 0},
		{"application/*", json, 2},
		{"application/json;q=0, */*", json, 2},
		{"application/json;q=0", json, 0},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", json, 3},
	}
	for _, tt := range tests {
		if got := acceptRank(tt.accept, tt.media); got != tt.want {
			t.Errorf("acceptRank(%q, %q) = %d; want %d", tt.accept, tt.media, got, tt.want)
		}
	}
}

// TestPreferAcceptedSameRequest: of answers whose media types rank the
// same for an Accept header, the one recorded for a request with the same
// Accept wins (kube-apiserver answers a CBOR request's 404 in JSON).
func TestPreferAcceptedSameRequest(t *testing.T) {
	x := func(id int64, media, accept string) *Exchange {
		info := &formats.ExchangeInfo{Request: formats.Request{Exchange: id}}
		if accept != "" {
			info.Request.Header = []formats.Header{{Name: "Accept", Value: accept}}
		}
		return &Exchange{ID: id, Info: info, Media: media}
	}
	xs := []*Exchange{
		x(0, "application/json", "application/json"),
		x(1, "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"),
		x(2, "application/json", "application/cbor"),
		x(3, "application/json", ""),
	}
	for _, tt := range []struct {
		accept string
		want   []int64
	}{
		{"application/cbor", []int64{2}},
		{"application/vnd.kubernetes.protobuf", []int64{1}},
		{"application/json", []int64{0}},
		{"", []int64{3}},
		{"application/yaml", []int64{0, 1, 2, 3}},
	} {
		var got []int64
		for _, c := range PreferAccepted(xs, tt.accept) {
			got = append(got, c.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("PreferAccepted(%q) = %v; want %v", tt.accept, got, tt.want)
		}
		if first := OrderAccepted(xs, tt.accept)[0].ID; first != tt.want[0] {
			t.Errorf("OrderAccepted(%q)[0] = %d; want %d", tt.accept, first, tt.want[0])
		}
	}
}
