package redact

// The JSON walker: its limits, its state, and how it holds back, releases
// and ends the bytes fed to it (the rest is in json_*.go).

import (
	"bytes"
	"sync"

	"github.com/wtrace/wtrace/formats"
)

// Limits of the JSON walker.
const (
	// MaxDepth bounds nesting, like encoding/json and json-iterator
	// (10000): deeper input is not a Kubernetes object; it fails closed.
	MaxDepth = 10000
	// MaxHold bounds the bytes a streaming walker holds back while the kind
	// of an object that may hold a credential is not known yet (an object
	// whose "kind" member comes after its "data", a list whose "kind"
	// comes after its items, a value longer than this). Past it, every
	// value still waiting is redacted (fail closed) and the bytes go on.
	// Kubernetes objects are at most 1.5 MiB (etcd's request limit), and
	// the apiserver writes "kind" first, so real traffic holds far less.
	MaxHold = 16 << 20
	// maxCapture bounds a decoded member name, kind, name or namespace.
	// The longest name the walker looks for is the 48-byte annotation key;
	// Kubernetes names are at most 253 bytes.
	maxCapture = 256
	// maxLiteral bounds a number or literal kept for validation.
	maxLiteral = 64
)

// jsonWalker finds and replaces credentials in JSON text fed in pieces,
// in one pass, holding back only the bytes of values whose fate is not
// known yet. It is the engine behind Event, Tail and Body for JSON.
type jsonWalker struct {
	s      *Secrets
	rep    *Report
	assume bool // the body was sent to a Secret endpoint

	arr   []byte // buf's array: buf == arr[off:]
	off   int
	buf   []byte // held bytes; buf[0] is at absolute offset base
	base  int64
	owned bool // buf may be written (else copied first)
	pos   int64

	rootKind string // kind of the first top-level object

	stack []jframe
	st    lstate
	esc   bool // in a string, after '\'
	hex   int  // in a string, \u hex digits still to come
	cp    capture
	cbuf  []byte // captured string or member name, raw (escapes undecoded)
	cover bool   // cbuf overflowed
	open  *cand  // candidate string being read
	lit   []byte // the literal being read (its first maxLiteral bytes)
	litAt int64  // where it began: held until it is known to be valid
	litN  int    // its length
	litNN bool   // it holds a byte that no number holds
	// streaming fill: the open candidate is replaced as it arrives (it
	// outgrew MaxHold)
	streamFill bool

	// text: a text/* body (a log, what a service proxy serves): JSON
	// values are walked where they begin at the top level, other lines
	// are text, and a value that does not parse fails closed only to the
	// end of its line, and only if that line may hold a credential
	// (sTextHold from lineAt).
	text   bool
	lineAt int64

	// Quoted text (quoted.go): the string value being read that is no
	// candidate, held from qStart until its end to be judged; depth, the
	// strings this walker's text is quoted in; one, stop after the first
	// top-level value (stopped, at stopAt).
	qOpen   bool
	qStart  int64
	depth   int
	one     bool
	stopped bool
	stopAt  int64

	failed  bool  // fail closed: every byte from failAt on is replaced
	failAt  int64 //
	changed bool
	// pending counts candidates waiting in frames; minPending is the
	// smallest start among them, recomputed only when some left (dirty).
	pending    int
	minPending int64
	dirty      bool
}

func newJSONWalker(s *Secrets, rep *Report, assume bool) *jsonWalker {
	return &jsonWalker{s: s, rep: rep, assume: assume, owned: true}
}

// walkers keeps the walkers of whole events (Secrets.Event) between
// events, with their stacks and buffers: one event after another, a
// recording would otherwise grow a new stack for each.
var walkers sync.Pool

// pooledJSONWalker is newJSONWalker(s, rep, false), reusing a walker that
// recycle returned. Nothing the walker returned refers to its own
// buffers: whole returns the event or a copy of it.
func pooledJSONWalker(s *Secrets, rep *Report) *jsonWalker {
	w, _ := walkers.Get().(*jsonWalker)
	if w == nil {
		return newJSONWalker(s, rep, false)
	}
	w.s, w.rep, w.owned = s, rep, true
	return w
}

// maxPooledFrames bounds the stack a recycled walker keeps (a deeply
// nested event's stack is dropped rather than held).
const maxPooledFrames = 256

// maxPooledCands bounds the waiting values a recycled frame keeps room
// for.
const maxPooledCands = 64

// recycle resets w and returns it to the pool; w must not be used after.
func (w *jsonWalker) recycle() {
	if cap(w.stack) > maxPooledFrames || cap(w.cbuf) > 64<<10 {
		return
	}
	st := w.stack[:cap(w.stack)]
	for i := range st {
		// A slot keeps the storage of its frame's waiting values: the
		// values of most objects wait for its end (see candidate).
		c := st[i].cands[:0]
		if cap(c) > maxPooledCands {
			c = nil
		}
		st[i] = jframe{cands: c}
	}
	*w = jsonWalker{stack: st[:0], cbuf: w.cbuf[:0], lit: w.lit[:0]}
	walkers.Put(w)
}

// write processes p (appended to the held bytes). What take returned
// before must have been consumed.
func (w *jsonWalker) write(p []byte) {
	start := w.pos
	w.appendHeld(p)
	if w.failed {
		w.pos += int64(len(p))
		w.replaceFrom(start)
		return
	}
	w.lex()
	if w.failed {
		w.replaceFrom(w.failAt) // still held: see frontier
		return
	}
	if w.streamFill && w.open != nil {
		w.fillOpen()
	}
	if w.pos-w.frontier() > MaxHold {
		w.overflow()
	}
}

// appendHeld appends p to the held bytes, moving them to the front of
// their array when the released prefix is at least as long (amortised
// O(1) per byte).
func (w *jsonWalker) appendHeld(p []byte) {
	held := len(w.arr) - w.off
	if w.off > 0 && w.off >= held {
		copy(w.arr, w.arr[w.off:])
		w.arr = w.arr[:held]
		w.off = 0
	}
	if cap(w.arr)-len(w.arr) < len(p) {
		n := make([]byte, held, max(2*(held+len(p)), 4<<10))
		copy(n, w.arr[w.off:])
		w.arr, w.off = n, 0
	}
	w.arr = append(w.arr, p...)
	w.buf = w.arr[w.off:]
}

// whole processes b, a complete document, without copying it unless a
// value is replaced; complete says whether it ended where it should.
func (w *jsonWalker) whole(b []byte, complete bool) []byte {
	w.arr, w.buf, w.owned = b, b, false
	w.lex()
	if w.failed {
		w.replaceFrom(w.failAt)
	}
	w.end(complete)
	return w.buf
}

// take returns the bytes that can be released and forgets them. They stay
// valid until the next write.
func (w *jsonWalker) take() []byte {
	f := w.frontier()
	n := int(f - w.base)
	if n <= 0 {
		return nil
	}
	out := w.buf[:n:n]
	w.base = f
	w.off += n
	w.buf = w.arr[w.off:]
	return out
}

// frontier is the absolute offset before which no byte can change any
// more.
func (w *jsonWalker) frontier() int64 {
	f := w.pos
	if w.failed {
		return f
	}
	if w.open != nil && !w.streamFill && w.open.start < f {
		f = w.open.start
	}
	if w.st == sLiteral && w.litAt < f {
		f = w.litAt // a literal is valid only once it ended
	}
	if w.qOpen && w.qStart < f {
		f = w.qStart // a string is judged once it ended
	}
	if w.st == sTextHold && w.lineAt < f {
		f = w.lineAt // a line is judged once it ended
	}
	if w.pending == 0 {
		return f
	}
	if w.dirty {
		w.dirty = false
		w.minPending = w.pos
		for i := range w.stack {
			fr := &w.stack[i]
			if len(fr.cands) > 0 && fr.cands[0].start < w.minPending {
				w.minPending = fr.cands[0].start
			}
			if len(fr.icands) > 0 && fr.icands[0].start < w.minPending {
				w.minPending = fr.icands[0].start
			}
		}
	}
	return min(f, w.minPending)
}

// addPending notes a candidate that waits in a frame from now on.
func (w *jsonWalker) addPending(n int, start int64) {
	if w.pending == 0 && !w.dirty {
		w.minPending = start
	} else if !w.dirty {
		w.minPending = min(w.minPending, start)
	}
	w.pending += n
}

// dropPending notes n candidates that no longer wait.
func (w *jsonWalker) dropPending(n int) {
	if n > 0 {
		w.pending -= n
		w.dirty = true
	}
}

// at returns the held byte at absolute offset o.
func (w *jsonWalker) at(o int64) byte { return w.buf[o-w.base] }

// writable makes buf writable (copy on first write in whole mode).
func (w *jsonWalker) writable() {
	if !w.owned {
		w.buf = bytes.Clone(w.buf)
		w.arr, w.off = w.buf, 0
		w.owned = true
	}
	w.changed = true
}

// end finishes the input: complete says the body ended where its framing
// said. Values still waiting when the text ends inside an object are
// redacted (fail closed).
func (w *jsonWalker) end(complete bool) {
	defer func() { w.st = sValue }() // nothing is open any more
	if w.st == sTextHold {
		w.judgeLine(w.lineAt, w.pos)
		return
	}
	if w.st == sText || w.st == sTextFill {
		return
	}
	if w.qOpen && !w.failed {
		// The text ends inside a string: what arrived of it is replaced
		// if it may quote a Secret (it cannot be judged whole).
		w.qOpen = false
		if w.heldQuotes() {
			w.writable()
			from := max(w.qStart, w.base)
			fill(w.buf[from-w.base:w.pos-w.base], unparsedFill)
			w.rep.fail(w.qStart, w.pos-from, "the text ended inside a string that may quote a Secret")
		}
	}
	if !w.failed && w.st == sLiteral && len(w.stack) == 0 {
		w.literalEnd()
		if w.failed {
			w.replaceFrom(w.failAt)
		}
	}
	if w.failed {
		return
	}
	if len(w.stack) == 0 && (w.st == sValue || w.st == sAfter) {
		return
	}
	msg := "the text ended inside a value"
	if complete {
		msg = "the body ended inside a JSON value"
	}
	if w.openOrPending() {
		w.resolveAll()
		w.rep.add(formats.RedactUnparsed, "", msg, 0, 0)
	} else {
		for i := len(w.stack) - 1; i >= 0; i-- {
			w.report(&w.stack[i])
		}
	}
	w.stack = w.stack[:0]
	w.open = nil
}
