package diff

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/internal/apipath"
	"github.com/wtrace/wtrace/replay/perturb"
)

// Perturbation is a perturbation applied during a perturbed run (package
// replay/perturb), as the run's Summary note lists it.
type Perturbation struct {
	// Session is "a" or "b": the session that lists it.
	Session string `json:"session"`
	// Time is when it was applied (RFC 3339), At since the run's start.
	Time    string `json:"time"`
	At      string `json:"at"`
	Spec    string `json:"spec"`
	Detail  string `json:"detail"`
	Finding string `json:"finding,omitempty"`

	t time.Time
}

// PerturbedVerdict is the verdict of a comparison with a perturbed run
// (one whose Summary note lists perturbations), unless Options.Verdict
// says otherwise: where the run ends, its end state — the retries and
// extra writes a perturbation causes are not differences.
var PerturbedVerdict = []Category{CategoryState}

// readPerturbations lists the perturbations the sessions' Summary notes
// name (a perturbed run's), in time order, and their findings (a client
// that retried before its Retry-After).
func (c *comparer) readPerturbations(a, b *formats.File) {
	for _, f := range []struct {
		f    *formats.File
		side string
	}{{a, "a"}, {b, "b"}} {
		s := f.f.Index().Summary
		if s == nil {
			continue
		}
		for _, ap := range perturb.ParseApplied(s.Note) {
			c.rep.Perturbations = append(c.rep.Perturbations, Perturbation{Session: f.side, Time: ap.Time.UTC().Format(formats.TimeFormat),
				At: ap.At.String(), Spec: ap.Spec, Detail: ap.Detail, Finding: ap.Finding, t: ap.Time})
			if ap.Finding != "" {
				c.rep.Findings = append(c.rep.Findings, ap.Spec+": "+ap.Finding)
			}
		}
	}
	sort.SliceStable(c.rep.Perturbations, func(i, j int) bool { return c.rep.Perturbations[i].t.Before(c.rep.Perturbations[j].t) })
}

// judgePerturbed makes the sessions differ when a perturbation revealed a
// finding, and names the perturbation that preceded the first
// difference.
func (c *comparer) judgePerturbed() {
	if len(c.rep.Findings) > 0 {
		c.rep.Same = false
	}
	if len(c.rep.Perturbations) == 0 || c.rep.Same {
		return
	}
	side := c.rep.Perturbations[0].Session
	first, ok := c.firstDifference(side)
	var pre *Perturbation
	for i := range c.rep.Perturbations {
		p := &c.rep.Perturbations[i]
		if p.Session != side || ok && p.t.After(first) {
			continue
		}
		if p.Finding != "" && pre != nil && pre.Finding == "" && pre.t.Equal(p.t) {
			continue
		}
		pre = p
	}
	if pre == nil {
		// The first difference lies before every perturbation: an end
		// state whose last write in the run came before it (the write
		// that should have followed never came). The run is the
		// perturbation's: the earliest one explains it.
		for i := range c.rep.Perturbations {
			if p := &c.rep.Perturbations[i]; p.Session == side {
				pre = p
				break
			}
		}
	}
	if len(c.rep.Findings) > 0 {
		for i := range c.rep.Perturbations {
			if p := &c.rep.Perturbations[i]; p.Finding != "" && (!ok || !p.t.After(first)) {
				pre = p
				break
			}
		}
	}
	c.rep.Preceding = pre
}

// firstDifference is the time of the earliest difference of the
// verdict's categories placed in the perturbed session (side); false
// when none is (every one is missing from it).
func (c *comparer) firstDifference(side string) (time.Time, bool) {
	var first time.Time
	found := false
	for _, g := range c.rep.Groups {
		for _, d := range g.Differences {
			if !slices.Contains(c.rep.Verdict, d.Category) {
				continue
			}
			pl := d.B
			if side == "a" {
				pl = d.A
			}
			if pl == nil {
				continue
			}
			t, err := time.Parse(formats.TimeFormat, pl.Time)
			if err != nil {
				continue
			}
			if !found || t.Before(first) {
				first, found = t, true
			}
		}
	}
	return first, found
}

// excusePerturbed leaves out of the end state of a comparison with a
// perturbed run the differences the perturbations themselves explain,
// counting them as Excused: the Events (core/v1 and events.k8s.io) —
// reports, which say a write failed where the perturbation failed it
// (FailedCreate for SuccessfulCreate) — and an object created in the
// other session with a generated name whose create in the perturbed run
// was applied and had its answer lost (error:when=after), one for one;
// and an object one session created and deleted that the other never
// made (both worlds end without it). A lost create's object no missing
// one accounts for is a difference (lostAndKept).
func (c *comparer) excusePerturbed() {
	if len(c.rep.Perturbations) == 0 {
		return
	}
	lost := map[string]int{}
	for _, p := range c.rep.Perturbations {
		if m, target, ok := perturb.LostWrite(p.Detail); ok && m == "POST" {
			if r, err := apipath.Parse(m, target); err == nil {
				lost[collectionKey(r.Group, r.Resource.Resource, r.Namespace)]++
			}
		}
	}
	excused := map[string]string{}
	var gone map[string]bool // objects whose last watch event is DELETED in both sessions
	for gi := range c.rep.Groups {
		g := &c.rep.Groups[gi]
		if g.Object == nil {
			continue
		}
		kept := g.Differences[:0]
		for _, d := range g.Differences {
			why := ""
			if d.Category == CategoryState {
				why = c.excuse(g.Object, d, lost)
				if why == "" && (d.Kind == KindChanged || d.Kind == KindMissing) && g.Object.Event == "" {
					if gone == nil {
						gone = c.goneInBoth()
					}
					switch {
					case d.Kind == KindMissing:
						// Updates the run never made to an object both
						// worlds deleted (the perturbation held them back
						// past its deletion); a missing create is not
						// excused here (madeAndGone, lost creates).
						if gone[objectKey(g.Object.Group, g.Object.Resource, g.Object.Namespace, g.Object.Name)] && !created(c.a, *g.Object) && !created(c.b, *g.Object) {
							why = "deleted in both worlds: the client's writes to it before the deletion are intermediate states"
						}
					case gone[objectKey(g.Object.Group, g.Object.Resource, g.Object.Namespace, g.Object.Name)]:
						why = "deleted in both worlds: what the client wrote last before the deletion is an intermediate state"
					case wordingOnly(d.Diff):
						why = "only the reason and message of a condition differ: the path the controller took, not where it ended"
					case onlyFields(d.Diff, `"observedGeneration":`):
						why = "only the observed generation differs: how many spec changes the object went through (created at its last spec, or changed to it), not where it ended"
					}
				}
			}
			if why == "" {
				kept = append(kept, d)
				continue
			}
			excused[g.Subject] = why
			st := &c.rep.Summary.State
			st.Excused++
			switch d.Kind {
			case KindMissing:
				st.Missing--
			case KindExtra:
				st.Extra--
			case KindChanged:
				st.Changed--
			}
		}
		g.Differences = kept
	}
	c.lostAndKept(lost)
	groups := c.rep.Groups[:0]
	for _, g := range c.rep.Groups {
		if len(g.Differences) > 0 {
			groups = append(groups, g)
		}
	}
	c.rep.Groups = groups
	for i := range c.rep.States {
		if why, ok := excused[c.rep.States[i].Subject]; ok {
			c.rep.States[i].Same, c.rep.States[i].Excused = true, why
		}
	}
}

// excuse says why end-state difference d of object o is the
// perturbation's, or "".
func (c *comparer) excuse(o *Object, d Difference, lost map[string]int) string {
	if o.Resource == "events" && (o.Group == "" || o.Group == "events.k8s.io") {
		return "an Event: a report of what the perturbation failed"
	}
	k := collectionKey(o.Group, o.Resource, o.Namespace)
	if d.Kind == KindMissing && strings.Contains(o.Name, "-#") && lost[k] > 0 && o.Subresource == "" {
		lost[k]--
		return "created in the perturbed run by a create whose answer the perturbation lost"
	}
	if (d.Kind == KindMissing || d.Kind == KindExtra) && c.madeAndGone[*o] {
		return "created and deleted in one session, never made in the other: both worlds end without it"
	}
	return ""
}

// lostAndKept adds, as an end-state difference, each object a create
// whose answer the perturbation lost made in the perturbed session (its
// watches show it, present at the end) that no excuse paired with an
// object of the other session: a client that created again after a lost
// answer, without looking, made one object too many (lost: the lost
// creates of each collection not excused yet). Without a watch of the
// collection, nothing shows such an object.
func (c *comparer) lostAndKept(lost map[string]int) {
	pert, other := c.b, c.a
	if c.rep.Perturbations[0].Session == "a" {
		pert, other = c.a, c.b
	}
	var seen, otherSeen map[string]seenEvent
	for k, n := range lost {
		if n <= 0 {
			continue
		}
		if seen == nil {
			seen, otherSeen = c.watched(pert), c.watched(other)
		}
		var found []string
		for key, ev := range seen {
			name, ok := strings.CutPrefix(key, k+"/")
			if !ok || strings.Contains(name, "/") || ev.typ == "DELETED" || pert.names.canon[name] != "" {
				continue
			}
			if _, ok := otherSeen[key]; ok {
				continue // the environment's: in both worlds
			}
			if c.wroteName(pert, key) {
				continue
			}
			found = append(found, key)
		}
		sort.Slice(found, func(i, j int) bool { return seen[found[i]].time < seen[found[j]].time })
		for _, key := range found[:min(n, len(found))] {
			parts := strings.SplitN(key, "/", 4)
			o := Object{Group: parts[0], Resource: parts[1], Namespace: parts[2], Name: parts[3]}
			ev := seen[key]
			d := Difference{Category: CategoryState, Kind: KindExtra, What: string(StateCreated),
				Detail: "created in the perturbed run by a create whose answer the perturbation lost, and kept: the client created again instead of finding it"}
			if pert == c.a {
				d.Kind, d.A = KindMissing, ev.first
			} else {
				d.B = ev.first
			}
			c.add(o.String(), &o, d)
			if d.Kind == KindExtra {
				c.rep.Summary.State.Extra++
			} else {
				c.rep.Summary.State.Missing++
			}
			c.rep.States = append(c.rep.States, ObjectState{Subject: o.String(), Object: o})
		}
	}
}

// wroteName reports whether the clients of s wrote the object of key
// (objectKey, the server's name) successfully.
func (c *comparer) wroteName(s *side, key string) bool {
	for o, ws := range s.writes {
		if objectKey(o.Group, o.Resource, o.Namespace, o.Name) != key {
			continue
		}
		for _, w := range ws {
			if w.status >= 200 && w.status < 300 {
				return true
			}
		}
	}
	return false
}

// created reports whether the clients of s created object o (a POST of
// it answered 2xx; o's subresource aside).
func created(s *side, o Object) bool {
	o.Subresource = ""
	for _, w := range s.writes[o] {
		if w.req.method == "POST" && w.status >= 200 && w.status < 300 {
			return true
		}
	}
	return false
}

func collectionKey(group, resource, ns string) string { return group + "/" + resource + "/" + ns }

func objectKey(group, resource, ns, name string) string {
	return group + "/" + resource + "/" + ns + "/" + name
}

// goneInBoth returns the objects (objectKey) whose last watch event, in
// each session, is a DELETED: both worlds end without them, whoever
// deleted them.
func (c *comparer) goneInBoth() map[string]bool {
	a, b := c.lastEvents(c.a), c.lastEvents(c.b)
	out := map[string]bool{}
	for k, t := range a {
		if t == "DELETED" && b[k] == "DELETED" {
			out[k] = true
		}
	}
	return out
}

// lastEvents returns the type of the last event (by time) of each object
// the watches of s show.
func (c *comparer) lastEvents(s *side) map[string]string {
	seen := c.watched(s)
	out := make(map[string]string, len(seen))
	for k, l := range seen {
		out[k] = l.typ
	}
	return out
}

// seenEvent is what the watches of a session show of one object: its
// last event's type and time, where they first showed it.
type seenEvent struct {
	time  int64
	typ   string
	first *Place
}

// watched returns what the watches of s show of each object (objectKey,
// the server's names).
func (c *comparer) watched(s *side) map[string]seenEvent {
	seen := map[string]seenEvent{}
	for _, k := range s.sOrder {
		for _, ch := range s.streams[k] {
			o := ch.req.obj
			es := c.events(s, ch)
			for {
				e, ok, err := es.next()
				if err != nil || !ok {
					break
				}
				m := e.peek()
				if m.Type != "ADDED" && m.Type != "MODIFIED" && m.Type != "DELETED" {
					continue
				}
				key := objectKey(o.Group, o.Resource, m.Namespace, m.Name)
				l, ok := seen[key]
				if !ok {
					l.first = e.place("")
				}
				if !ok || e.time >= l.time {
					l.time, l.typ = e.time, m.Type
				}
				seen[key] = l
			}
		}
	}
	return seen
}

// wordingOnly reports whether unified diff u changes only "reason" and
// "message" fields (of status conditions: how a controller worded the
// path it took to the same condition type and status).
func wordingOnly(u string) bool { return onlyFields(u, `"reason":`, `"message":`) }

// onlyFields reports whether unified diff u changes lines of the given
// fields alone (each a JSON member's opening, `"reason":`), and some.
func onlyFields(u string, fields ...string) bool {
	changed := 0
	for _, line := range strings.Split(u, "\n") {
		if strings.HasPrefix(line, "---") || strings.HasPrefix(line, "+++") || line == "" || line[0] != '-' && line[0] != '+' {
			continue
		}
		f := strings.TrimSpace(line[1:])
		if !slices.ContainsFunc(fields, func(p string) bool { return strings.HasPrefix(f, p) }) {
			return false
		}
		changed++
	}
	return changed > 0
}
