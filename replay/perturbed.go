package replay

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/replay/internal/fromworld"
	"github.com/wtrace/wtrace/replay/internal/stream"
	"github.com/wtrace/wtrace/replay/internal/tape"
	"github.com/wtrace/wtrace/replay/perturb"
)

// A perturbed run (Options.Perturb, package replay/perturb): the Server
// asks a perturb.Engine how to answer each request of a resource, tells
// it of each write answered and each watch event sent, and acts for it at
// its points (perturbation's Actions: ending watches, a restart, a
// client's restart).

// HowPerturbed names an answer a perturbation gave in the world's place
// (a 429, a 409, a 5xx: the request log's How).
const HowPerturbed = "perturbed"

// perturbation is a Server's perturbed run.
type perturbation struct {
	s   *Server
	eng *perturb.Engine

	mu        sync.Mutex
	conns     map[net.Conn]struct{} // the connections open (for restart)
	downUntil time.Time             // restart: refused and not ready until then
	samples   []rvSample            // the world's point over time (stale:age)
	held      []func()              // holds released at the clients' next request (holdNext)
	wg        sync.WaitGroup        // ClientRestart's goroutines
}

// maxHold bounds how long an action that cut the clients off keeps the
// run busy waiting for them to come back (holdNext): client-go's
// reflector backs off 0.8–1.6 s after a failed list or a 410, doubling
// on each failure in a row, so a few failures during a restart take
// seconds, not this long.
const maxHold = 30 * time.Second

// holdNext keeps the run busy (Settle, the quiet pace) from an action
// that cut the clients off — watches ended, connections closed, the
// replay down, the controller restarted — until the next request of a
// client arrives (or maxHold): a client backing off before it comes
// back is not a client done.
func (p *perturbation) holdNext() {
	release := p.s.world.Hold()
	t := time.AfterFunc(maxHold, release)
	p.mu.Lock()
	p.held = append(p.held, func() { t.Stop(); release() })
	p.mu.Unlock()
}

// releaseHeld releases the holds of holdNext: a client came back.
func (p *perturbation) releaseHeld() {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, release := range held {
		release()
	}
}

// rvSample is the world's point at a time.
type rvSample struct {
	at time.Time
	rv uint64
}

// maxSamples bounds the samples kept for stale:age.
const maxSamples = 1 << 16

// errPerturbTape is New's error for perturbations of a replay without a
// Live world.
var errPerturbTape = errors.New("replay: perturbations apply to a replay that answers writes from its world (--writes answer or apply), not to one that plays the recording (--writes reject or recorded)")

// newPerturbation sets up s's perturbed run, if Options.Perturb asks for
// one.
func newPerturbation(s *Server) error {
	if len(s.opts.Perturb) == 0 {
		return nil
	}
	if !s.world.Live() {
		return errPerturbTape
	}
	p := &perturbation{s: s, conns: map[net.Conn]struct{}{}}
	p.eng = perturb.NewEngine(s.opts.Perturb, p, s.clock.Now, func(a perturb.Applied) {
		s.log.Info("replay: perturbed", "spec", a.Spec, "at", a.At.Round(time.Millisecond).String(), "detail", a.Detail, "finding", a.Finding)
	})
	s.world.SetHooks(fromworld.Hooks{Event: p.eng.Event, EventDelay: p.eng.EventDelay})
	s.pert = p
	return nil
}

// Perturbations returns the perturbations applied so far (nil for a run
// that is not perturbed).
func (s *Server) Perturbations() []perturb.Applied {
	if s.pert == nil {
		return nil
	}
	return s.pert.eng.Applied()
}

// route answers request r (read as q) of a perturbed run: as the engine
// decides, else as next (Server.route) does.
func (p *perturbation) route(r *http.Request, q tape.Query, body []byte, next func(*http.Request, tape.Query, []byte) *stream.Answer) *stream.Answer {
	p.eng.Start()
	if !(q.Group == "coordination.k8s.io" && q.Resource.Resource == "leases") {
		// A client came back; a leader elector's renewal, on its own
		// timer, says nothing of its informers backing off.
		p.releaseHeld()
	}
	p.sample()
	pr := perturb.Request{Method: q.Method, Verb: q.Verb, Group: q.Group, Resource: q.Resource.Resource,
		Namespace: q.Namespace, Name: q.Name, Subresource: q.Subresource, IsResource: q.IsResource, Watch: q.Watch,
		ResourceVersion: q.ResourceVersion, Continue: q.Continue, UserAgent: r.UserAgent(), Target: r.URL.RequestURI(), Body: body}
	d := p.eng.Request(pr)
	if d.Delay > 0 {
		if pr.Watch { // not in flight otherwise: the run is not settled while it is held
			release := p.s.world.Hold()
			defer release()
		}
		t := time.NewTimer(d.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	if d.Refuse != nil {
		return refusal(q, d.Refuse)
	}
	if d.Skip {
		r = r.WithContext(fromworld.WithSkip(r.Context()))
	}
	if d.StaleChanges > 0 || d.StaleAge > 0 {
		q = p.stale(q, d)
	}
	a := next(r, q, body)
	if d.Lose != nil {
		a = refusal(q, d.Lose)
	}
	if pr.IsWrite() {
		p.eng.Wrote(pr, a.Status)
	}
	return a
}

// stale reads q as the world was as d asks: an Exact LIST at that
// moment's resourceVersion.
func (p *perturbation) stale(q tape.Query, d perturb.Decision) tape.Query {
	var rv uint64
	if d.StaleChanges > 0 {
		rv = p.s.store.ChangesBack(d.StaleChanges)
	} else {
		rv = p.rvAt(p.s.clock.Now().Add(-d.StaleAge))
	}
	query := url.Values{}
	for k, v := range q.Query {
		query[k] = v
	}
	query.Set("resourceVersion", strconv.FormatUint(rv, 10))
	query.Set("resourceVersionMatch", string(metav1.ResourceVersionMatchExact))
	q.Query = query
	return q
}

// sample notes the world's point now (for stale:age).
func (p *perturbation) sample() {
	rv := p.s.store.LastRV()
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.samples); n > 0 && p.samples[n-1].rv == rv {
		return
	}
	if len(p.samples) == maxSamples {
		p.samples = append(p.samples[:0], p.samples[maxSamples/2:]...)
	}
	p.samples = append(p.samples, rvSample{at: p.s.clock.Now(), rv: rv})
}

// rvAt is the world's point at time t (the oldest sampled before any).
func (p *perturbation) rvAt(t time.Time) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	rv := p.s.store.LastRV()
	if len(p.samples) > 0 {
		rv = p.samples[0].rv
	}
	for _, sm := range p.samples {
		if sm.at.After(t) {
			break
		}
		rv = sm.rv
	}
	return rv
}

// refusal answers with ref's Status, in the encoding the client's Accept
// asks for, with its Retry-After.
func refusal(q tape.Query, ref *perturb.Refusal) *stream.Answer {
	st := &metav1.Status{Status: metav1.StatusFailure, Code: int32(ref.Code), Reason: metav1.StatusReason(ref.Reason), Message: ref.Message}
	if ref.RetryAfter > 0 {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(ref.RetryAfter)}
	}
	if q.Name != "" {
		if st.Details == nil {
			st.Details = &metav1.StatusDetails{}
		}
		st.Details.Name, st.Details.Group, st.Details.Kind = q.Name, q.Group, q.Resource.Resource
	}
	m := codec.StatusMedia(q.Accept)
	body := codec.StatusBody(m, st)
	return &stream.Answer{How: HowPerturbed, Status: ref.Code, Serve: func(sr *stream.Stream, r *http.Request) {
		h := sr.Header()
		h.Set("Content-Type", m.ContentType(codec.TargetObject))
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("Cache-Control", "no-cache, private")
		if ref.RetryAfter > 0 {
			h.Set("Retry-After", strconv.Itoa(ref.RetryAfter))
		}
		sr.WriteHeader(ref.Code)
		sr.Send(body)
	}}
}

// connState follows the server's connections (restart closes them, and
// refuses new ones while it lasts).
func (p *perturbation) connState(c net.Conn, st http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch st {
	case http.StateNew:
		if p.s.clock.Now().Before(p.downUntil) {
			c.Close() // refused: the apiserver is down
			return
		}
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// down reports whether the replay is restarting (/readyz fails, requests
// are cut).
func (p *perturbation) down() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.clock.Now().Before(p.downUntil)
}

// readyCheck is /readyz's check of a perturbed run: failing while it
// restarts.
func (p *perturbation) readyCheck() error {
	if p.down() {
		return errors.New("the replay is restarting (perturbation restart)")
	}
	return nil
}

// closeConns ends every watch of the world by a connection reset and
// closes every connection.
func (p *perturbation) closeConns() {
	p.s.world.EndWatches("", true, false)
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// CloseWatches, ExpireWatches, Restart and ClientRestart are the
// engine's Actions.
func (p *perturbation) CloseWatches(resource string, reset bool) []string {
	ended := p.s.world.EndWatches(resource, reset, false)
	if len(ended) > 0 {
		p.holdNext()
	}
	return ended
}

func (p *perturbation) ExpireWatches(resource string) []string {
	ended := p.s.world.EndWatches(resource, false, true)
	if len(ended) > 0 {
		p.holdNext()
	}
	return ended
}

func (p *perturbation) Restart(d time.Duration) {
	p.holdNext()
	p.mu.Lock()
	p.downUntil = p.s.clock.Now().Add(d)
	p.mu.Unlock()
	p.s.mu.Lock()
	ln := p.s.listener
	p.s.mu.Unlock()
	if ln != nil {
		// Refused while down, as by an apiserver's closed port (else
		// accepted and closed at once: connState).
		ln.Pause()
		time.AfterFunc(d, func() {
			if !ln.Resume() {
				p.s.log.Warn("replay: restart: cannot listen again", "addr", ln.Addr().String())
			}
		})
	}
	p.closeConns()
}

func (p *perturbation) ClientRestart(sp perturb.Spec) error {
	p.holdNext() // until a client comes back (a restart by signal returns at once)
	p.closeConns()
	restart := p.s.opts.ClientRestart
	if restart == nil {
		restart = perturb.RestartClient
	}
	if p.s.opts.ClientRestart == nil && sp.Exec == "" && sp.Signal == "" {
		return restart(p.s.ctx, sp) // its error says what is missing
	}
	release := p.s.world.Hold() // busy while the harness restarts it
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer release()
		if err := restart(p.s.ctx, sp); err != nil {
			p.s.log.Warn("replay: client-restart: restarting the controller failed", "spec", sp.String(), "err", err)
		}
	}()
	return nil
}

// wait waits for the restarts handed to the harness.
func (p *perturbation) wait() {
	if p != nil {
		p.eng.Stop()
		p.wg.Wait()
		p.releaseHeld()
	}
}

var _ perturb.Actions = (*perturbation)(nil)
