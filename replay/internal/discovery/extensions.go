package discovery

import (
	"encoding/json"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The groups kube-apiserver's /apis lists for the world's objects, not
// for its built-in API: its aggregator's (legacy APIGroupList) those of
// its APIServices, the CRDs' among them; its aggregated discovery those
// of the established CRDs (world.Store.ServedExtensions). They change as
// clients write, so they are added to the documents of each answer.

// withLegacyExtensions returns the legacy /apis document b with the
// world's groups appended (those it does not list already).
func (d *Docs) withLegacyExtensions(b []byte) []byte {
	if d.store == nil {
		return b
	}
	legacy, _ := d.store.ServedExtensions()
	if len(legacy) == 0 {
		return b
	}
	var gl metav1.APIGroupList
	if json.Unmarshal(b, &gl) != nil {
		return b
	}
	have := map[string]bool{}
	for _, g := range gl.Groups {
		have[g.Name] = true
	}
	for _, g := range legacy {
		if !have[g.Name] {
			gl.Groups = append(gl.Groups, g)
		}
	}
	out, err := json.Marshal(gl)
	if err != nil {
		return b
	}
	return out
}

// withAggregatedExtensions returns the aggregated /apis document b with
// the world's CRD groups appended (those it does not list already). The
// document's own items are kept as they are; the new ones are written as
// kube-apiserver writes its groups (a null creationTimestamp, which Go's
// encoding of ObjectMeta leaves out).
func (d *Docs) withAggregatedExtensions(b []byte) []byte {
	if d.store == nil {
		return b
	}
	_, aggregated := d.store.ServedExtensions()
	if len(aggregated) == 0 {
		return b
	}
	var l map[string]json.RawMessage
	var items []json.RawMessage
	if json.Unmarshal(b, &l) != nil || json.Unmarshal(l["items"], &items) != nil {
		return b
	}
	have := map[string]bool{}
	for _, it := range items {
		var g struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(it, &g) == nil {
			have[g.Metadata.Name] = true
		}
	}
	for _, g := range aggregated {
		if have[g.Name] {
			continue
		}
		it, err := json.Marshal(struct {
			Metadata struct {
				CreationTimestamp *string `json:"creationTimestamp"`
				Name              string  `json:"name"`
			} `json:"metadata"`
			Versions []apidiscoveryv2.APIVersionDiscovery `json:"versions"`
		}{Metadata: struct {
			CreationTimestamp *string `json:"creationTimestamp"`
			Name              string  `json:"name"`
		}{Name: g.Name}, Versions: g.Versions})
		if err != nil {
			return b
		}
		items = append(items, it)
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return b
	}
	l["items"] = raw
	out, err := json.Marshal(l)
	if err != nil {
		return b
	}
	return out
}
