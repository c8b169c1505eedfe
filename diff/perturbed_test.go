package diff

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPerturbedEndState: a comparison with a perturbed run judges where
// the run ends. A create whose answer the perturbation lost made an
// object the client found (same) or created again beside (differs: one
// object too many); an object one session created and deleted and the
// other never made ends absent in both (same).
func TestPerturbedEndState(t *testing.T) {
	gen := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"generateName":"c-","namespace":"demo"}}`)
	named := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"demo"}}`)
	lostStatus := []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
	when := time.Unix(0, t0).Add(1500 * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
	lost := "perturbation +1.5s @" + when + " error:when=after: POST " + cmPath + " applied, its answer lost: 503"
	gone := "perturbation +1.5s @" + when + " gone: 410 Expired on 1 watch (configmaps ×1)"
	watch := func(names ...string) sx {
		var evs [][]byte
		for i, n := range names {
			evs = append(evs, ev("ADDED", obj{name: n, ns: "demo", rv: 10 + i}))
		}
		return sx{target: cmPath + "?watch=true", events: evs, at: 500 * time.Millisecond}
	}
	create := func(name string, at time.Duration) sx {
		return sx{method: "POST", target: cmPath, ctype: "application/json", body: gen, status: 201,
			resp: obj{name: name, ns: "demo", rv: 10}.json(), at: at}
	}
	lostCreate := sx{method: "POST", target: cmPath, ctype: "application/json", body: gen, status: 503, resp: lostStatus, at: 2 * time.Second}
	recorded := []sx{watch("c-aaaaa"), create("c-aaaaa", time.Second)}
	envCM := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"e","namespace":"demo","resourceVersion":"10"},"data":{"a":"1"}}`)
	throttled := "perturbation +0.9s @" + when + " throttle:share=0.3,seed=3,on=writes: PUT " + cmPath + "/e refused: 429, Retry-After 1s"
	// updatedAndGone is the watch of ConfigMap e, made by the
	// environment, and (deleted) its deletion.
	updatedAndGone := func(deleted bool) sx {
		evs := [][]byte{ev("ADDED", obj{name: "e", ns: "demo", rv: 10})}
		if deleted {
			evs = append(evs, ev("DELETED", obj{name: "e", ns: "demo", rv: 12}))
		}
		return sx{target: cmPath + "?watch=true", events: evs, at: 500 * time.Millisecond}
	}
	tests := []struct {
		name     string
		a        []sx
		b        []sx
		note     string
		wantSame bool
	}{
		{"lost answer, object found", recorded, []sx{watch("c-bbbbb"), lostCreate}, lost, true},
		{"lost answer, created again", recorded, []sx{watch("c-bbbbb", "c-ccccc"), lostCreate, create("c-ccccc", 3*time.Second)}, lost, false},
		{"created and deleted, never made", []sx{
			{method: "POST", target: cmPath, ctype: "application/json", body: named, status: 201, resp: obj{name: "x", ns: "demo", rv: 10}.json(), at: time.Second},
			{method: "DELETE", target: cmPath + "/x", status: 200, resp: obj{name: "x", ns: "demo", rv: 11}.json(), at: 2 * time.Second},
		}, []sx{{target: cmPath + "/y", status: 404, at: time.Second}}, gone, true},
		// An object of the environment the client updated before both
		// worlds deleted it: the run, held back by the perturbation,
		// never updated it (same); kept in both, the update missing is a
		// write that never happened (differs).
		{"updated, deleted in both, not updated in the run", []sx{
			updatedAndGone(true), {method: "PUT", target: cmPath + "/e", ctype: "application/json", body: envCM, status: 200, resp: obj{name: "e", ns: "demo", rv: 11}.json(), at: time.Second},
		}, []sx{updatedAndGone(true)}, throttled, true},
		{"updated, kept in both, not updated in the run", []sx{
			updatedAndGone(false), {method: "PUT", target: cmPath + "/e", ctype: "application/json", body: envCM, status: 200, resp: obj{name: "e", ns: "demo", rv: 11}.json(), at: time.Second},
		}, []sx{updatedAndGone(false)}, throttled, false},
		{"created and kept, never made", []sx{
			{method: "POST", target: cmPath, ctype: "application/json", body: named, status: 201, resp: obj{name: "x", ns: "demo", rv: 10}.json(), at: time.Second},
		}, []sx{{target: cmPath + "/y", status: 404, at: time.Second}}, gone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := writeSession(t, "a.wt", tt.a...)
			b := filepath.Join(t.TempDir(), "b.wt")
			if err := writeSessionNote(b, tt.note, tt.b...); err != nil {
				t.Fatal(err)
			}
			rep := mustDiff(t, a, b, Options{})
			if rep.Same != tt.wantSame {
				var sb strings.Builder
				rep.WriteText(&sb, TextOptions{})
				t.Fatalf("Sessions(%s) same = %v; want %v\n%s", tt.name, rep.Same, tt.wantSame, sb.String())
			}
			if !tt.wantSame && (rep.Preceding == nil || rep.Preceding.Spec == "") {
				t.Errorf("Sessions(%s): Preceding = %+v; want the perturbation named", tt.name, rep.Preceding)
			}
		})
	}
}
