package world

import (
	"cmp"
	"net/http"
	"slices"
)

// What the recorded clients wrote, and how far the run's clients are. A
// replay paced by quiet (package replay) applies the environment's next
// change once the run has made the writes the recording shows before it
// — paired as diff pairs them: by object, a created object by its
// recorded counterpart — rather than after a fixed quiet window alone: a
// controller that batches its work (the job controller syncs a Job a
// second after its Pods changed) is quiet while it waits, and a change
// applied then meets it before the writes the recording shows it made
// first.

// writeKey names an object's writes: its resource, its recorded
// namespace and name, its subresource.
type writeKey struct {
	res Resource
	key Key
	sub string
}

// recWrite is one successful write of a client under test in the
// recording, at the capture time its answer came.
type recWrite struct {
	time int64
	wk   writeKey
}

// followed reports whether the writes of resource r are followed: every
// resource's but Events' (named by a time, another in every run, and what
// nothing in the environment waits for) and leader election's Leases
// (renewed on a timer).
func followed(r Resource) bool {
	switch {
	case r.Resource == "events" && (r.Group == "" || r.Group == "events.k8s.io"):
		return false
	case r.Resource == "leases" && r.Group == "coordination.k8s.io":
		return false
	}
	return true
}

// noteWrite notes a successful write of a client under test of the
// recording (the loader, for every one).
func (b *envBuilder) noteWrite(at int64, t Target, key Key) {
	if followed(t.Resource) {
		b.recWrites = append(b.recWrites, recWrite{time: at, wk: writeKey{res: t.Resource, key: key, sub: t.Subresource}})
	}
}

// writesBefore sets, for each change, how many of the recorded writes
// (sorted by time) came before it.
func writesBefore(changes []Change, ws []recWrite) {
	slices.SortStableFunc(ws, func(a, b recWrite) int { return cmp.Compare(a.time, b.time) })
	n := 0
	for i := range changes {
		for n < len(ws) && ws[n].time < changes[i].Time {
			n++
		}
		changes[i].writes = n
	}
}

// followState is how far the run's clients are in the recorded writes
// (guarded by the Store's lock).
type followState struct {
	writes []recWrite       // the recording's, by time
	need   map[writeKey]int // of writes[:upTo], per object
	upTo   int              // how many of writes are in need
	run    map[writeKey]int // the run's successful writes, per (recorded) object
}

// noteRunWrite counts a successful write of the run (the lock is held):
// of the object's recorded counterpart, when a client under test created
// it in the recording.
func (s *Store) noteRunWrite(r *Request, t Target, resp *Response) {
	if s.live == nil || resp == nil || resp.Code < 200 || resp.Code > 299 || !followed(t.Resource) || len(r.Query["dryRun"]) > 0 {
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return
	}
	if t.Collection() {
		return // a create counts when it is paired (pairCreated); a delete-collection is no object's
	}
	key := Key{t.Namespace, t.Name}
	if rc := s.live.byRunKey[t.Resource][key]; rc != nil {
		key = rc.key
	}
	s.live.follow.run[writeKey{res: t.Resource, key: key, sub: t.Subresource}]++
}

// WritesBehind returns how many of the writes the recorded clients made
// before the environment's next change (after the last one: all of
// them) the run's clients have not made yet, object by object: 0 when
// the run is as far as the recording was when the change came. Writes
// are counted per object (a created object as its recorded counterpart),
// Events and Leases left out; a run that repeats a write counts it
// twice, so a controller that makes fewer, larger writes than the
// recorded one can stay behind: the caller bounds its wait.
func (s *Store) WritesBehind() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.env == nil || s.live == nil {
		return 0
	}
	f := &s.live.follow
	upTo := len(f.writes)
	if s.envNext < len(s.env.Changes) {
		upTo = s.env.Changes[s.envNext].writes
	}
	for ; f.upTo < upTo; f.upTo++ {
		f.need[f.writes[f.upTo].wk]++
	}
	behind := 0
	for wk, n := range f.need {
		if m := f.run[wk]; m < n {
			behind += n - m
		}
	}
	return behind
}

// Awaits reports whether change c is about an object a client under test
// created in the recording and the run's clients have not created (yet):
// applied now, it would be dropped. A replay at the recorded pace gives
// the run a moment to create it (the recorded controller created it
// before the change came; a loaded machine may make the run's later).
func (s *Store) Awaits(c Change) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return false
	}
	rc := s.live.byKey[c.Resource][c.Key]
	return rc != nil && rc.run == nil
}
