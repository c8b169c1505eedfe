package world

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// liveState pairs the objects the clients under test created in the
// recording with those the run's clients create, so that the
// environment's later changes to them (a Pod the controller created,
// bound by the scheduler, updated by a kubelet, deleted by the garbage
// collector) follow the run's object. Guarded by the Store's lock.
type liveState struct {
	created  []*recCreate                    // in recorded order
	byUID    map[string]*recCreate           // recorded uid →
	byKey    map[Resource]map[Key]*recCreate // recorded name →
	runUID   map[string]*recCreate           // the run's uid → its recorded pair
	byRunKey map[Resource]map[Key]*recCreate // the run's name → its recorded pair
	applied  []Applied                       // what ApplyNext did, in order
	follow   followState                     // the recorded clients' writes, the run's (follow.go)
}

func newLiveState(created []*recCreate, writes []recWrite) *liveState {
	ls := &liveState{created: created, byUID: map[string]*recCreate{}, byKey: map[Resource]map[Key]*recCreate{},
		runUID: map[string]*recCreate{}, byRunKey: map[Resource]map[Key]*recCreate{},
		follow: followState{writes: writes, need: map[writeKey]int{}, run: map[writeKey]int{}}}
	for _, rc := range created {
		ls.byUID[rc.uid] = rc
		if ls.byKey[rc.res] == nil {
			ls.byKey[rc.res] = map[Key]*recCreate{}
		}
		ls.byKey[rc.res][rc.key] = rc
	}
	return ls
}

// How ApplyNext applied a change (Applied.Outcome).
const (
	// AppliedRecorded: the world held the version the change was made
	// to; the recorded version is stored as it is (byte for byte, with
	// the recorded resourceVersion when it is still free).
	AppliedRecorded = "recorded"
	// AppliedRebased: the run made the object differ from the recording;
	// what the change changed (a merge patch from the recorded version
	// before it) is applied to the run's version.
	AppliedRebased = "rebased"
	// AppliedDropped: the change has nothing to apply to (Reason says
	// why: an object the run never created, or deleted).
	AppliedDropped = "dropped"
)

// Applied is what ApplyNext did with one change of the environment.
type Applied struct {
	Change
	Outcome string
	Reason  string // for AppliedDropped, and notes
	// Key is the object changed in the run (a paired object's name
	// differs from the recorded one); Served the resourceVersion it got.
	Key    Key
	Served string
}

// Environment returns the environment of a Live store (nil otherwise).
// The caller must not change it.
func (s *Store) Environment() *Environment {
	return s.env
}

// NextChange returns the environment's next change to apply, and false
// when every one was applied (or the store is not Live).
func (s *Store) NextChange() (Change, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.env == nil || s.envNext >= len(s.env.Changes) {
		return Change{}, false
	}
	return s.env.Changes[s.envNext], true
}

// ApplyNext applies the environment's next change to the world, as the
// apiserver would have stored it then, and wakes the watches it concerns.
// ok is false when none is left. Safe for concurrent use with every other
// method: reads and writes see the change once it returns.
func (s *Store) ApplyNext() (a Applied, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.env == nil || s.envNext >= len(s.env.Changes) {
		return Applied{}, false
	}
	c := s.env.Changes[s.envNext]
	s.envNext++
	a = s.applyLocked(c)
	s.live.applied = append(s.live.applied, a)
	return a, true
}

// AppliedChanges returns what ApplyNext did so far, in order.
func (s *Store) AppliedChanges() []Applied {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return nil
	}
	return append([]Applied(nil), s.live.applied...)
}

// applyLocked applies change c (the lock is held).
func (s *Store) applyLocked(c Change) Applied {
	a := Applied{Change: c, Key: c.Key}
	drop := func(format string, args ...any) Applied {
		a.Outcome, a.Reason = AppliedDropped, fmt.Sprintf(format, args...)
		return a
	}
	h, ok := s.hist(c.Resource)
	if !ok {
		h = s.res[storageOf(c.Resource)]
	}
	if h == nil {
		return drop("unknown resource %s", c.Resource)
	}
	if rc := s.live.byKey[c.Resource][c.Key]; rc != nil {
		if rc.run == nil {
			return drop("the recorded client created %s; the run did not (yet)", c.Key)
		}
		a.Key = rc.run.key
	}
	cur := s.current(h, a.Key)
	verbatim := cur != nil && c.prev != nil && (cur == c.prev || cur.src == c.prev)
	switch {
	case c.Type == Deleted:
		if cur == nil && c.prev == nil {
			// The recording never showed the object before (a watch
			// whose LIST the session lacks): it existed before what the
			// session holds, and its deletion is served as recorded, as
			// the recorded apiserver sent it.
			e, err := s.storeEnv(h, a.Key, c.e, c.e.rv, Deleted, true)
			if err != nil {
				return drop("%v", err)
			}
			a.Outcome, a.Served = AppliedRecorded, formatRV(e.rv)
			return a
		}
		if cur == nil {
			return drop("not in the run's world")
		}
		src := cur
		if verbatim {
			src = c.e
		}
		e, err := s.storeEnv(h, a.Key, src, c.e.rv, Deleted, verbatim)
		if err != nil {
			return drop("%v", err)
		}
		a.Outcome, a.Served = outcome(verbatim), formatRV(e.rv)
		if !verbatim {
			a.Outcome = AppliedRecorded // a deletion is a deletion
		}
		return a
	case cur == nil && c.prev != nil && !(c.Type == Added && c.prev.typ == Deleted):
		// (An ADDED after a deletion is the object created again.)
		return drop("deleted in the run")
	case cur == nil:
		src, translated, reason := s.translateOwners(c.e)
		if reason != "" {
			return drop("%s", reason)
		}
		// A MODIFIED of an object the recording never showed before (a
		// watch whose LIST the session lacks) stays a MODIFIED, as the
		// recorded apiserver sent it.
		typ := Added
		if c.Type == Modified && !translated {
			typ = Modified
		}
		e, err := s.storeEnv(h, a.Key, src, c.e.rv, typ, !translated)
		if err != nil {
			return drop("%v", err)
		}
		a.Outcome, a.Served = outcome(!translated), formatRV(e.rv)
		if translated {
			a.Reason = "owner references follow the run's objects"
		}
		return a
	case c.prev == nil:
		return drop("the run already has %s", a.Key)
	case verbatim:
		e, err := s.storeEnv(h, a.Key, c.e, c.e.rv, Modified, true)
		if err != nil {
			return drop("%v", err)
		}
		a.Outcome, a.Served = AppliedRecorded, formatRV(e.rv)
		return a
	}
	rv, changed, err := s.rebaseLocked(h, a.Key, cur, c)
	if err != nil {
		return drop("%v", err)
	}
	a.Outcome, a.Served = AppliedRebased, rv
	if !changed {
		a.Reason = "nothing left to change"
	}
	return a
}

func outcome(verbatim bool) string {
	if verbatim {
		return AppliedRecorded
	}
	return AppliedRebased
}

// envRV is the resourceVersion a change recorded at rec gets: rec itself
// while it is above everything served (so the recorded bytes go out as
// they are), else the next number.
func (s *Store) envRV(rec uint64) uint64 {
	rv := rec
	if rv <= s.clk.last {
		rv = s.clk.last + 1
	}
	s.clk.last = rv
	s.publish()
	return rv
}

// storeEnv stores a version of key made from src (an entry of the
// recording, or of the world) as an event of type typ, at the
// resourceVersion envRV gives rec (the lock is held). With verbatim, the
// entry remembers src as its source, so that the recording's next change
// to it is stored as recorded too.
func (s *Store) storeEnv(h *history, key Key, src *entry, rec uint64, typ EventType, verbatim bool) (*entry, error) {
	rv := s.envRV(rec)
	obj, alt := src.obj, src.alt
	if served, ok := objectRV(obj); !ok || served != formatRV(rv) {
		var err error
		if obj, err = setRV(obj, formatRV(rv)); err != nil {
			return nil, err
		}
		if alt.Raw != nil {
			if alt, err = setRV(alt, formatRV(rv)); err != nil {
				alt = codec.Object{}
			}
		}
	}
	e := &entry{rv: rv, synth: true, time: s.now().UnixNano(), typ: typ, key: key, obj: obj, alt: alt,
		size: int64(len(obj.Raw)+len(alt.Raw)) + 128}
	if verbatim {
		e.src = src
	}
	if err := s.addSynth(h, e); err != nil {
		return nil, err
	}
	return e, nil
}

// translateOwners returns the object of a new version of the environment
// whose owner references name objects the clients under test created,
// with those references naming the run's corresponding objects instead
// (translated), or reason when one of them has none.
func (s *Store) translateOwners(e *entry) (out *entry, translated bool, reason string) {
	obj, err := codec.Decode(e.obj)
	if err != nil {
		return e, false, ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return e, false, ""
	}
	refs := m.GetOwnerReferences()
	changed := false
	for i, ref := range refs {
		rc := s.live.byUID[string(ref.UID)]
		if rc == nil {
			continue
		}
		if rc.run == nil {
			return nil, false, fmt.Sprintf("owned by %s %s, which the run did not create", ref.Kind, rc.key)
		}
		refs[i].UID, refs[i].Name = types.UID(rc.run.uid), rc.run.key.Name
		changed = true
	}
	if !changed {
		return e, false, ""
	}
	m.SetOwnerReferences(refs)
	o, err := codec.Encode(obj, frame.JSON)
	if err != nil {
		return nil, false, err.Error()
	}
	c := *e
	c.obj, c.alt, c.attrs = o, codec.Object{}, nil
	return &c, true, ""
}

// volatileMeta are the metadata fields a change of the environment does
// not carry over to the run's object: the server's own, and the names the
// run chose.
var volatileMeta = []string{"resourceVersion", "managedFields", "generation", "uid", "creationTimestamp",
	"name", "generateName", "namespace", "selfLink"}

// rebaseLocked applies to the run's version cur of key what change c
// changed in the recording: the JSON merge patch from the recorded version
// before it to it, without the server's metadata (the lock is held). It
// returns the served resourceVersion, and false when nothing was left to
// change.
func (s *Store) rebaseLocked(h *history, key Key, cur *entry, c Change) (string, bool, error) {
	prevJ, err := jsonOf(c.prev.obj)
	if err != nil {
		return "", false, err
	}
	nextJ, err := jsonOf(c.e.obj)
	if err != nil {
		return "", false, err
	}
	patch, err := jsonpatch.CreateMergePatch(prevJ, nextJ)
	if err != nil {
		return "", false, err
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return "", false, err
	}
	if md, ok := p["metadata"].(map[string]any); ok {
		for _, f := range volatileMeta {
			delete(md, f)
		}
		if len(md) == 0 {
			delete(p, "metadata")
		}
	}
	delete(p, "apiVersion")
	delete(p, "kind")
	if len(p) == 0 {
		o, _, _ := s.servedObject(cur, cur.obj.Format)
		rv, _ := objectRV(o)
		return rv, false, nil
	}
	patch, err = json.Marshal(p)
	if err != nil {
		return "", false, err
	}
	curObj, err := s.decodeAs(cur, c.e.obj.GVK())
	if err != nil {
		return "", false, err
	}
	curJ, err := json.Marshal(curObj)
	if err != nil {
		return "", false, err
	}
	merged, err := jsonpatch.MergePatch(curJ, patch)
	if err != nil {
		return "", false, err
	}
	obj, err := codec.Decode(codec.Object{Format: frame.JSON, APIVersion: c.e.obj.APIVersion, Kind: c.e.obj.Kind, Raw: merged})
	if err != nil {
		return "", false, err
	}
	info := h.info
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(curObj)
	m.SetGeneration(om.GetGeneration())
	if policyFor(info).generation {
		if changed, err := specChanged(obj, curObj); err == nil && changed {
			m.SetGeneration(om.GetGeneration() + 1)
		}
	}
	if sameObject(obj, curObj) {
		return om.GetResourceVersion(), false, nil
	}
	m.SetResourceVersion("")
	typ := Modified
	if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		typ = Deleted // what was left to wait for is gone
	}
	o, err := codec.Encode(obj, frame.JSON)
	if err != nil {
		return "", false, err
	}
	e, err := s.storeEnv(h, key, &entry{obj: o}, c.e.rv, typ, false)
	if err != nil {
		return "", false, err
	}
	return formatRV(e.rv), true, nil
}

// jsonOf returns an object as JSON text.
func jsonOf(o codec.Object) ([]byte, error) {
	if o.Format == frame.JSON {
		return o.Raw, nil
	}
	obj, err := codec.Decode(o)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// pairCreated pairs an object a client of the run created (the lock is
// held) with the first object of the recording that a client under test
// created alike and that is not paired yet: the same resource and
// namespace, the same generateName (or name, without one), owners that
// are the same objects (the run's owners as their recorded pairs), and
// the same identity (ident.Of: a DaemonSet's Pod is the recorded one of
// its node, whichever the controller created first).
func (s *Store) pairCreated(res Resource, obj runtime.Object) {
	if s.live == nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	owners := map[string]bool{}
	for _, ref := range m.GetOwnerReferences() {
		uid := string(ref.UID)
		if rc := s.live.runUID[uid]; rc != nil {
			uid = rc.uid
		}
		owners[uid] = true
	}
	id := identityOf(obj)
	for _, rc := range s.live.created {
		if rc.run != nil || rc.res != res || rc.key.Namespace != m.GetNamespace() || rc.identity != id {
			continue
		}
		if g := m.GetGenerateName(); g != "" {
			if rc.generateName != g {
				continue
			}
		} else if rc.key.Name != m.GetName() {
			continue
		}
		if len(rc.owners) != len(owners) {
			continue
		}
		same := true
		for _, o := range rc.owners {
			same = same && owners[o]
		}
		if !same {
			continue
		}
		rc.run = &runObject{key: Key{m.GetNamespace(), m.GetName()}, uid: string(m.GetUID())}
		s.live.runUID[rc.run.uid] = rc
		if s.live.byRunKey[res] == nil {
			s.live.byRunKey[res] = map[Key]*recCreate{}
		}
		s.live.byRunKey[res][rc.run.key] = rc
		s.live.follow.run[writeKey{res: res, key: rc.key}]++
		return
	}
}

// Pairs returns the objects the clients under test created in the
// recording and their counterparts in the run: recorded namespace/name →
// the run's, per resource ("" for one the run has not created).
func (s *Store) Pairs() map[Resource]map[Key]Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return nil
	}
	out := map[Resource]map[Key]Key{}
	for _, rc := range s.live.created {
		if out[rc.res] == nil {
			out[rc.res] = map[Key]Key{}
		}
		var k Key
		if rc.run != nil {
			k = rc.run.key
		}
		out[rc.res][rc.key] = k
	}
	return out
}

// warmFieldManagers builds the field managers' schemas of the built-in
// kinds (about 150 ms) ahead of the first write, off the store's lock.
func warmFieldManagers() { _ = builtinTypes() }
