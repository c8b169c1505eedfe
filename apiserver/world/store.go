package world

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// DefaultMaxBytes is the MaxBytes a zero Options means.
const DefaultMaxBytes = 1 << 30

// ErrTooLarge: the session's objects exceed Options.MaxBytes.
var ErrTooLarge = errors.New("state: session objects exceed the memory limit")

// Options configure a Store. The zero value uses the wall clock, random
// UIDs and DefaultMaxBytes.
type Options struct {
	// Now is the time written into objects (creationTimestamp,
	// deletionTimestamp, managedFields) and Table ages are computed
	// against; nil means time.Now.
	Now func() time.Time
	// NewUID returns the uid of a created object; nil means a random
	// (version 4) UUID, as the apiserver's.
	NewUID func() string
	// MaxBytes bounds the object bytes the store holds (every version of
	// every object the session shows, and the clients' writes); loading a
	// session beyond it fails with ErrTooLarge, a write beyond it is
	// answered with a 500 InternalError Status and not stored. 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// Until, if not 0, loads only what the session shows before this
	// capture time (Unix ns): exchanges that began before it, watch
	// events and bodies completed before it — the world as it was then
	// (edit.Slice: the world at the start of a slice).
	Until int64
	// Live loads the session as the environment of a run of clients
	// under test (see Environment): the store starts with the world as
	// the session first shows it, the changes the clients under test did
	// not make are held back for ApplyNext, and those they made are left
	// out.
	Live bool
	// Clients picks the clients under test of a Live store: a recorded
	// request is theirs when any Client matches it (a zero Client matches
	// every request). nil picks by the session's source: every client of
	// a recording made through the proxy or of a replay's run (which
	// record the one client pointed at them), none of a capture. With
	// NoClients, none.
	Clients   []Client
	NoClients bool
	// HistoryWindow bounds the versions of objects the store keeps besides
	// the current ones, as the apiserver's compaction does: past it, the
	// oldest are forgotten, and a watch, or a LIST with
	// resourceVersionMatch=Exact, from a resourceVersion older than what
	// is kept gets 410 Expired. 0 means DefaultHistoryWindow; negative
	// keeps every version.
	HistoryWindow int
	// Midstream is MidstreamTargets of the session, when the caller has
	// read them already (the replay's matcher needs them too); nil: Load
	// reads them.
	Midstream map[int64]string
	// User is who every client is taken to be (a replay authenticates no
	// one): the user a SelfSubjectReview names, a SelfSubjectAccessReview
	// and SelfSubjectRulesReview ask about, and a CertificateSigningRequest
	// is stamped with as its requestor. nil means DefaultUser.
	User *authenticationv1.UserInfo
}

// DefaultHistoryWindow is the HistoryWindow a zero Options means: the
// versions of about the last 10,000 writes (kube-apiserver's watch cache
// keeps up to 100,000 events per resource; etcd compacts every 5 minutes).
const DefaultHistoryWindow = 10000

// EventType is the type of a change in the history.
type EventType uint8

const (
	Added EventType = iota + 1
	Modified
	Deleted
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	}
	return "UNKNOWN"
}

// entry is one version of one object: what a recorded event, LIST item
// or GET showed, or what a client's write made.
type entry struct {
	rv      uint64 // recorded resourceVersion (recorded) or served one (synth)
	synth   bool
	time    int64 // capture time (recorded) or Now of the write, Unix ns
	typ     EventType
	key     Key
	obj     codec.Object // the object (for Deleted, as it was deleted)
	alt     codec.Object // the same version in the other format, if the session holds it
	size    int64
	inScope bool // deleted because it left a selector's scope, not for sure
	// inferred: a deletion a LIST showed by leaving the object out; its
	// object is the last version seen, with an older resourceVersion.
	inferred bool
	// watched: a watch event showed this version as a change (not only a
	// LIST, a GET, or a watch's initial events).
	watched bool
	// first: one of the initial events of a resource's first watch (a
	// streaming list, or a watch from "" or "0", started with it): the
	// world as the session first shows it, however long its events took
	// to come.
	first bool
	// src is the recorded version a Live store's entry was stored from
	// as it is (nil when the environment's change was rebased, or for a
	// client's write).
	src *entry
	// defaulted: what etcd would hold of this version lacks what reads
	// default (a PersistentVolumeClaim the world created: its strategy
	// cleared the status after the decoder's defaults, and every read
	// adds phase Pending back), so the next update is a write even when
	// the object read back is the same.
	defaulted bool

	// other is the same version of the object as the other version of its
	// storage showed it (versions.go), if the session holds it (a
	// pointer: most entries have none).
	other *codec.Object

	// attrs are obj's labels and selectable fields, decoded once, when a
	// selector first looks at this version (see selector.matchesEntry;
	// the lock is held): nil until then, and reset wherever obj is
	// replaced.
	attrs *attrs
}

// Key names an object within a resource.
type Key struct {
	Namespace, Name string
}

// internNS returns the canonical copy of namespace ns. The store's
// entries and its watches keep their namespaces interned: a watch compares
// its namespace with every change's, and two strings that share their
// bytes compare at once. It also keeps one copy of each namespace.
func internNS(ns string) string {
	if ns == "" {
		return ""
	}
	return unique.Make(ns).Value()
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// history is one resource's objects over time.
type history struct {
	info Info
	objs map[Key][]*entry // per object, in history order
	rec  []*entry         // recorded entries, by rv
	syn  []*entry         // synthesized entries, by served rv (appended)
}

func newHistory(info Info) *history {
	return &history{info: info, objs: map[Key][]*entry{}}
}

// Store is the session's view of the world: every object the recording
// shows, at every resourceVersion, plus what the replay's clients wrote.
// Safe for concurrent use (one lock, never held while a caller writes to
// the network).
type Store struct {
	opts Options
	now  func() time.Time

	mu      sync.Mutex
	res     map[Resource]*history
	clk     *clock
	bytes   int64
	changed chan struct{} // closed and replaced when a write lands
	oldest  uint64        // oldest resourceVersion the store can answer at
	// compacted: the store has forgotten versions (compact), so what is
	// older than oldest is not only what the session never showed.
	compacted bool

	// env is the environment of a Live store (nil otherwise), envNext the
	// index of its next change; live pairs the objects the clients under
	// test created in the recording with the run's.
	env     *Environment
	envNext int
	live    *liveState
	// historic counts the versions of objects that are not current (at
	// least: compaction recounts them), for maybeCompact.
	historic int

	// For ObserveN's path without the lock: the world's point, and the
	// recorded resourceVersion above which numbers are served shifted
	// (math.MaxUint64: none). Written with mu held.
	fastPoint atomic.Uint64
	shiftFrom atomic.Uint64

	// tokens are the tokens the world issued (token.go), signed with
	// tokenKey (made at the first).
	tokens   map[string]issued
	tokenKey *ecdsa.PrivateKey

	// frames are the framed watch events Watch.Take encoded last, shared
	// by every watch that sends the same change in the same encoding
	// (guarded by mu).
	frames frameCache
}

// Info returns what the store knows of resource r: from the session, else
// from the built-in kinds. ok is false for a resource it knows nothing of.
func (s *Store) Info(r Resource) (Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.infoLocked(r)
}

func (s *Store) infoLocked(r Resource) (Info, bool) {
	if sharesStorage(r) {
		// Its history is its storage's, whose info is the other version's.
		return builtinInfo(r)
	}
	if h, ok := s.res[r]; ok && h.info.Kind != "" {
		return h.info, true
	}
	return builtinInfo(r)
}

// hist returns the history of r, creating it when the resource is known:
// its storage's (storageOf), which holds the objects of every version it
// serves.
func (s *Store) hist(r Resource) (*history, bool) {
	r = storageOf(r)
	if h, ok := s.res[r]; ok && h.info.Kind != "" {
		return h, true
	}
	info, ok := builtinInfo(r)
	if !ok {
		return nil, false
	}
	h := newHistory(info)
	s.res[r] = h
	return h, true
}

// Resources lists the resources the store holds objects of, sorted.
func (s *Store) Resources() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Info
	for _, h := range s.res {
		if len(h.rec)+len(h.syn) > 0 {
			out = append(out, h.info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource.String() < out[j].Resource.String() })
	return out
}

// Changed returns a channel closed at the next write that lands (watchers
// wait on it for the events of clients' writes).
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Store) notify() {
	s.publish()
	close(s.changed)
	s.changed = make(chan struct{})
}

// publish copies the clock's point and first shift to the fields ObserveN
// reads without the lock (the lock is held).
func (s *Store) publish() {
	s.fastPoint.Store(s.clk.point)
	from := uint64(math.MaxUint64)
	if len(s.clk.shifts) > 0 {
		from = s.clk.shifts[0].after
	}
	s.shiftFrom.Store(from)
}

// ObserveN is Observe for a numeric resourceVersion: it returns the
// number to serve in its place. The replay calls it for every recorded
// event it sends; while the world's point is past rv and nothing below rv
// was shifted (the common case: every watcher after the first to send an
// event) it takes no lock.
func (s *Store) ObserveN(rv uint64) uint64 {
	if rv <= s.fastPoint.Load() && rv <= s.shiftFrom.Load() {
		return rv
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.clk.observe(rv)
	s.publish()
	return out
}

// ServedN returns the resourceVersion recorded rv goes out as, without
// moving the world's point.
func (s *Store) ServedN(rv uint64) uint64 {
	if rv <= s.shiftFrom.Load() {
		return rv
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clk.served(rv)
}

// Wrote reports whether a client's write changed an object of the
// resource path names (a collection or an object path).
func (s *Store) Wrote(path string) bool {
	t, ok := ParsePath(path)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.res[storageOf(t.Resource)]
	return ok && len(h.syn) > 0
}

// Observe tells the store that recorded resourceVersion rv is being
// served to a client (a recorded event, bookmark, LIST or object): the
// world's point moves up to it. It returns the resourceVersion to serve
// in its place: rv itself unless clients' writes made room below it
// (changed is then true and the bytes must be rewritten). A resourceVersion
// that is not a number is returned as is.
func (s *Store) Observe(rv string) (served string, changed bool) {
	n, ok := parseRV(rv)
	if !ok {
		return rv, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.clk.observe(n)
	s.publish()
	if out == n {
		return rv, false
	}
	return formatRV(out), true
}

// Recorded returns the recorded resourceVersion that served resourceVersion
// rv stands for (rv itself while nothing was shifted), and false when rv
// is one the replay gave a client's write or the session never held.
func (s *Store) Recorded(rv string) (string, bool) {
	n, ok := parseRV(rv)
	if !ok {
		return rv, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.clk.recorded(n)
	return formatRV(r), ok
}

// LastRV returns the newest resourceVersion served so far (recorded or
// written), as a number.
func (s *Store) LastRV() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clk.last
}

// Point returns the world's point: the newest resourceVersion served to
// any client (recorded or written).
func (s *Store) Point() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return formatRV(s.clk.last)
}

// order is e's place in the served history (its served resourceVersion).
func (s *Store) order(e *entry) uint64 {
	if e.synth {
		return e.rv
	}
	return s.clk.served(e.rv)
}

// visible reports whether e is part of the history at served
// resourceVersion at: recorded entries up to the world's point only (the
// rest is the recording's future).
func (s *Store) visible(e *entry, at uint64) bool {
	if !e.synth && e.rv > s.clk.point {
		return false
	}
	return s.order(e) <= at
}

// latest returns the newest visible entry of an object at served
// resourceVersion at, or nil.
func (s *Store) latest(h *history, k Key, at uint64) *entry {
	return s.latestOf(h, k, at, false)
}

// latestOf is latest, leaving the clients' writes out if recordedOnly.
func (s *Store) latestOf(h *history, k Key, at uint64, recordedOnly bool) *entry {
	var best *entry
	for _, e := range h.objs[k] {
		if recordedOnly && e.synth {
			continue
		}
		if s.visible(e, at) && (best == nil || s.order(e) >= s.order(best)) {
			best = e
		}
	}
	return best
}

// current returns the object's current version (nil if it does not exist
// now).
func (s *Store) current(h *history, k Key) *entry {
	e := s.latest(h, k, s.clk.last)
	if e == nil || e.typ == Deleted {
		return nil
	}
	return e
}

// addSynth inserts a synthesized entry (the lock is held).
func (s *Store) addSynth(h *history, e *entry) error {
	if s.bytes+e.size > s.maxBytes() && s.window() >= 0 {
		// Forget all history but the current objects before refusing.
		s.compact(0)
	}
	if s.bytes+e.size > s.maxBytes() {
		return fmt.Errorf("%w (%d bytes)", ErrTooLarge, s.maxBytes())
	}
	s.bytes += e.size
	e.key.Namespace = internNS(e.key.Namespace)
	h.syn = append(h.syn, e)
	h.objs[e.key] = append(h.objs[e.key], e)
	s.historic++
	s.maybeCompact()
	s.notify()
	return nil
}

func (s *Store) maxBytes() int64 {
	if s.opts.MaxBytes > 0 {
		return s.opts.MaxBytes
	}
	return DefaultMaxBytes
}
