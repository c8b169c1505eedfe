// Package ident says what identifies an object a controller creates when
// its name does not: the apiserver generates the names of a DaemonSet's
// Pods, a Job's, an EndpointSlice's, so two runs of one scenario name
// them differently, and the order their creates were answered in is not
// theirs either (a controller creates them concurrently). What the
// controller made each one for is: a DaemonSet's Pod is the one for its
// node, an indexed Job's the one for its completion index, a
// StatefulSet's the one of its ordinal.
//
// The replay's world (pairing the run's objects with the recording's) and
// diff (naming generated objects alike in two sessions) read it here,
// from the object's JSON, so that both pair the same objects. Safe for
// concurrent use; it keeps nothing.
package ident

import (
	"encoding/json"
	"strconv"
)

// The labels and annotations a controller writes an identity in.
const (
	// JobCompletionIndex is the annotation (and, since v1.28, label)
	// holding an indexed Job's Pod's completion index.
	JobCompletionIndex = "batch.kubernetes.io/job-completion-index"
	// PodIndex is the label holding a StatefulSet's (and an indexed
	// Job's) Pod's ordinal.
	PodIndex = "apps.kubernetes.io/pod-index"
)

// podView is what Of reads of an object.
type podView struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
		Affinity *struct {
			NodeAffinity *struct {
				Required *struct {
					Terms []struct {
						MatchFields []struct {
							Key      string   `json:"key"`
							Operator string   `json:"operator"`
							Values   []string `json:"values"`
						} `json:"matchFields"`
					} `json:"nodeSelectorTerms"`
				} `json:"requiredDuringSchedulingIgnoredDuringExecution"`
			} `json:"nodeAffinity"`
		} `json:"affinity"`
	} `json:"spec"`
}

// Of returns what identifies the object of JSON document doc among those
// its controller made alike ("" when nothing does, or doc is not a Pod):
//
//   - "index=N": an indexed Job's Pod (its completion index);
//   - "ordinal=N": a StatefulSet's Pod (its ordinal);
//   - "node=NAME": a Pod made for one node — a DaemonSet's, whose
//     required node affinity names the node by metadata.name (the
//     DaemonSet controller's, since v1.12), or one created bound.
//
// The index comes first: an indexed Job's Pod has both labels.
func Of(doc []byte) string {
	var v podView
	if json.Unmarshal(doc, &v) != nil || v.Kind != "" && v.Kind != "Pod" {
		return ""
	}
	md := v.Metadata
	if i, ok := index(md.Annotations[JobCompletionIndex]); ok {
		return "index=" + i
	}
	if i, ok := index(md.Labels[JobCompletionIndex]); ok {
		return "index=" + i
	}
	if i, ok := index(md.Labels[PodIndex]); ok {
		return "ordinal=" + i
	}
	if n := affinityNode(&v); n != "" {
		return "node=" + n
	}
	if v.Spec.NodeName != "" {
		return "node=" + v.Spec.NodeName
	}
	return ""
}

// affinityNode is the one node a Pod's required node affinity names by
// metadata.name (matchFields, operator In, one value), as the DaemonSet
// controller writes it; "" otherwise.
func affinityNode(v *podView) string {
	a := v.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.Required == nil {
		return ""
	}
	node := ""
	for _, t := range a.NodeAffinity.Required.Terms {
		for _, f := range t.MatchFields {
			if f.Key != "metadata.name" || f.Operator != "In" || len(f.Values) != 1 || node != "" && node != f.Values[0] {
				return ""
			}
			node = f.Values[0]
		}
	}
	return node
}

// index reads a decimal index as written (no sign, no leading zeros but
// "0").
func index(s string) (string, bool) {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil || strconv.FormatUint(n, 10) != s {
		return "", false
	}
	return s, true
}
