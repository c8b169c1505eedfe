package export

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
)

// Overview is what a session holds at a glance, from its index alone: what
// `wtrace replay` says of the session it serves.
type Overview struct {
	Exchanges int
	Events    int64
	// First and Last are the earliest and latest capture times of the
	// exchanges' records (0 if none).
	First, Last int64
	// Watch and List are a recorded watch and LIST to try against a replay:
	// the path and the parameters that select what is served (selectors;
	// watch=true for the watch); "" when the session has none.
	Watch, List string
}

// NewOverview reads the overview of an index.
func NewOverview(idx *formats.Index) Overview {
	o := Overview{Exchanges: len(idx.Exchanges)}
	for _, x := range idx.Exchanges {
		o.Events += x.Frames
		if x.First != 0 && (o.First == 0 || x.First < o.First) {
			o.First = x.First
		}
		o.Last = max(o.Last, x.Last)
		if x.Request.Missing || x.Request.Method != "GET" {
			continue
		}
		if x.Frames > 0 && o.Watch == "" {
			o.Watch = exampleTarget(x.Request.Target, true)
		}
		if x.Frames == 0 && o.List == "" && strings.HasPrefix(x.Request.Target, "/api") {
			o.List = exampleTarget(x.Request.Target, false)
		}
	}
	return o
}

// exampleTarget keeps the path and the parameters that select what is
// served (selectors, watch) of a recorded target.
func exampleTarget(target string, watch bool) string {
	r, err := apipath.Parse("GET", target)
	if err != nil {
		return target
	}
	q := r.Query
	keep := url.Values{}
	for _, k := range []string{"labelSelector", "fieldSelector"} {
		if v := q.Get(k); v != "" {
			keep.Set(k, v)
		}
	}
	if watch {
		keep.Set("watch", "true")
	}
	if len(keep) == 0 {
		return r.Path
	}
	return r.Path + "?" + keep.Encode()
}

// KubectlWatch turns a watch path (Overview.Watch) into kubectl's
// arguments that watch the same: "get configmaps -n demo -w",
// "get deployments.apps -w"; "" when the path names no resource list.
func KubectlWatch(watchPath string) string {
	r, err := apipath.Parse(http.MethodGet, watchPath)
	if err != nil || !r.IsResource || r.Resource.Resource == "" || r.Name != "" || r.Subresource != "" {
		return ""
	}
	res := r.Resource.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Namespace != "" {
		return fmt.Sprintf("get %s -n %s -w", res, r.Namespace)
	}
	return fmt.Sprintf("get %s -w", res)
}
