package perturb

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The Engine's decisions request by request (Engine.Request): the
// write an error refuses or whose answer it loses, the first update of
// an object a conflict refuses, the share of requests a throttle refuses
// and the early retries it books and reports.

// decideError refuses, or loses the answer of, the write at a's point
// (the lock is held).
func (e *Engine) decideError(a *armed, r Request, d *Decision) {
	if !r.IsWrite() || a.used >= a.Count || !matches(a.Resource, r) {
		return
	}
	if a.At.Kind == AtWrite {
		if !a.At.objectMatches(r) {
			return
		}
		a.n++
		if a.n < a.At.N {
			return
		}
	} else if !a.reached {
		return
	}
	a.used++
	ref := &Refusal{Code: a.Code, Reason: reasons[a.Code], Message: messages[a.Code]}
	if a.Mode == "after" {
		d.Lose = ref
		e.note(a, fmt.Sprintf("%s %s%s%d", r.Method, r.Target, lostDetail, a.Code), "")
	} else {
		d.Refuse = ref
		e.note(a, fmt.Sprintf("%s %s refused: %d", r.Method, r.Target, a.Code), "")
	}
	d.Spec = a.text
}

var reasons = map[int]string{500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout", 409: "Conflict", 429: "TooManyRequests"}

var messages = map[int]string{
	500: "Internal error occurred: etcdserver: request timed out",
	503: "the server is currently unable to handle the request",
	504: "the server was unable to return a response in the time allotted, but may still be processing the request",
}

// decideConflict refuses the first update of each object (the lock is
// held).
func (e *Engine) decideConflict(a *armed, r Request, d *Decision) {
	if r.Verb != "update" || r.Name == "" || a.Count > 0 && a.used >= a.Count {
		return
	}
	key := strings.Join([]string{r.Group, r.Resource, r.Namespace, r.Name}, "/")
	if a.seen[key] {
		return
	}
	a.seen[key] = true
	a.used++
	kind := r.Resource
	if r.Group != "" {
		kind += "." + r.Group
	}
	msg := fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", kind, r.Name)
	d.Refuse = &Refusal{Code: http.StatusConflict, Reason: "Conflict", Message: msg}
	d.Spec = a.text
	e.note(a, fmt.Sprintf("%s %s refused: 409 Conflict", r.Method, r.Target), "")
}

// retryTolerance is how much sooner than its Retry-After a retry may
// come before it counts as ignoring it (clock granularity, scheduling).
const retryTolerance = 100 * time.Millisecond

// retryGrace is how long past its Retry-After a refusal is given to be
// waited out (a client retrying on time) before a request refused again
// early, and never retried on time, is reported.
const retryGrace = 2 * time.Second

// refusedAt is one 429 a throttle answered: when it may be retried, and
// whether the request came before an earlier 429 of the same request
// could be retried.
type refusedAt struct {
	until time.Time
	early bool
	wait  time.Duration // how soon after that earlier 429 it came
}

// decideThrottle answers a share of the requests 429, and a request
// that comes again before a 429 of it may be retried 429 again (the
// lock is held).
//
// A request identical to one refused (same client, target and body)
// that comes before the Retry-After passed is not proof the client
// ignored it: a controller sends identical requests side by side (a
// ReplicaSet's Pods, created from one template with generateName).
// What tells them apart is what follows: a client that honours
// Retry-After retries each refused request once it passed; one that
// ignores it retries at once, again and again, and never waits. So each
// refusal is booked, a request coming after the oldest refusal's
// Retry-After waits that one out, one coming before it is refused again
// as early (and booked), and a request refused early whose
// refusal is not waited out by retryGrace after its Retry-After is
// reported (throttleFindings), once per request.
func (e *Engine) decideThrottle(a *armed, r Request, now time.Time, d *Decision) {
	if a.On == "reads" && r.IsWrite() || a.On == "writes" && !r.IsWrite() {
		return
	}
	if a.For > 0 && now.Sub(a.at) > a.For {
		return
	}
	key := throttleKey(r)
	retry := time.Duration(a.RetryAfter) * time.Second
	ref := &Refusal{Code: http.StatusTooManyRequests, Reason: "TooManyRequests",
		Message: "Too many requests, please try again later.", RetryAfter: a.RetryAfter}
	if book := a.refused[key]; len(book) > 0 {
		// Early: no refusal of it may be retried yet.
		if early := book[0].until.Sub(now); early > retryTolerance {
			a.refused[key] = append(book, refusedAt{until: now.Add(retry), early: true, wait: retry - early})
			e.note(a, fmt.Sprintf("%s %s refused again: 429 (came %s after a 429 with Retry-After %ds)",
				r.Method, r.Target, (retry-early).Round(time.Millisecond), a.RetryAfter), "")
			d.Refuse, d.Spec = ref, a.text
			return
		}
		// Waited out: the oldest refusal (booked in time order).
		if len(book) == 1 {
			delete(a.refused, key)
		} else {
			a.refused[key] = book[1:]
		}
	}
	if a.Count > 0 && a.used >= a.Count {
		return
	}
	a.eligible++
	if !chosen(a.Seed, a.eligible, a.Share) {
		return
	}
	a.used++
	a.refused[key] = append(a.refused[key], refusedAt{until: now.Add(retry)})
	a.targets[key] = r.Method + " " + r.Target
	d.Refuse, d.Spec = ref, a.text
	e.note(a, fmt.Sprintf("%s %s refused: 429, Retry-After %ds", r.Method, r.Target, a.RetryAfter), "")
}

// throttleFindings notes, once per request, each request refused early
// whose refusal was not waited out by retryGrace past its Retry-After
// (the lock is held; see decideThrottle).
func (e *Engine) throttleFindings(now time.Time) {
	for _, a := range e.specs {
		if a.Kind != Throttle {
			continue
		}
		var keys []string
		for key, book := range a.refused {
			if a.early[key] {
				continue
			}
			for _, b := range book {
				if b.early && now.Sub(b.until) > retryGrace {
					keys = append(keys, key)
					break
				}
			}
		}
		sort.Slice(keys, func(i, j int) bool { return a.refused[keys[i]][0].until.Before(a.refused[keys[j]][0].until) })
		for _, key := range keys {
			a.early[key] = true
			book := a.refused[key]
			n, first := 0, time.Duration(-1)
			for _, b := range book {
				if b.early {
					n++
					if first < 0 {
						first = b.wait
					}
				}
			}
			what := a.targets[key]
			e.note(a, fmt.Sprintf("%s: %d 429s not waited out", what, len(book)),
				fmt.Sprintf("%s retried after %s, Retry-After %ds (%d times before it passed; never retried after it)",
					what, first.Round(time.Millisecond), a.RetryAfter, n))
		}
	}
}

// throttleKey names a request as its client would retry it.
func throttleKey(r Request) string {
	h := sha256.New()
	for _, s := range []string{r.UserAgent, r.Method, r.Target} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(r.Body)
	return string(h.Sum(nil))
}

// chosen reports whether the n-th eligible request is among share of
// them, as seed picks: the same on every run.
func chosen(seed int64, n uint64, share float64) bool {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(seed))
	binary.LittleEndian.PutUint64(b[8:], n)
	sum := sha256.Sum256(b[:])
	return float64(binary.LittleEndian.Uint64(sum[:8])>>11)/float64(1<<53) < share
}
