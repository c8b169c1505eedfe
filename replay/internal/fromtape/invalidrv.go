package fromtape

import (
	"fmt"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
)

// invalidRVWatch answers a watch from a resourceVersion that is not a
// number (resourceVersion=abc, -1) as kube-apiserver v1.33 does: 500 with
// a Status without a reason, in the client's encoding — the storage layer
// fails to parse it (APIObjectVersioner.ParseResourceVersion), and the
// error reaches the client as an internal one (a LIST from the same
// resourceVersion is a 400 BadRequest, the world's answer). Checked
// against the real binary by TestWatchInvalidRV. ok is false for a request
// that is no watch, when rv is a number (or "", "0"), or when the session
// recorded a watch from this very resourceVersion (its recording is
// served), whatever answers the watch otherwise (the world or the
// recording).
func (a *Answerer) invalidRVWatch(q tape.Query) (rt *stream.Answer, ok bool) {
	rv := q.ResourceVersion
	if !q.Watch || rv == "" || rv == "0" {
		return nil, false
	}
	_, err := strconv.ParseUint(rv, 10, 64)
	if err == nil {
		return nil, false
	}
	for _, x := range a.m.ByKey[q.Key] {
		if x.Q.ResourceVersion == rv {
			return nil, false
		}
	}
	st := &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: fmt.Sprintf("resourceVersion: Invalid value: %q: %v", rv, err)}
	m := codec.StatusMedia(q.Accept)
	return fromworld.Respond(&world.Response{Code: http.StatusInternalServerError, ContentType: m.ContentType(codec.TargetObject),
		Body: codec.StatusBody(m, st), How: stream.HowError, Transcoded: true}), true
}
