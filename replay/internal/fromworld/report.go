package fromworld

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
)

// EnvironmentDone returns a channel closed once every change of the
// environment was applied (nil for a replay that does not answer writes).
func (a *Answerer) EnvironmentDone() <-chan struct{} {
	if a.env == nil {
		return nil
	}
	return a.env.done
}

// Settle waits until the environment was played (a replay that answers
// writes) and the clients have then been quiet for window: no request but
// watches in flight, and none begun or ended (the run is over). It
// returns false when done is closed first or the server closes.
func (a *Answerer) Settle(done <-chan struct{}, window time.Duration) bool {
	if a.env != nil {
		select {
		case <-a.env.done:
		case <-done:
			return false
		case <-a.ctx.Done():
			return false
		}
	}
	tick := time.NewTicker(max(window/8, 5*time.Millisecond))
	defer tick.Stop()
	for {
		now := a.clock.Now()
		if a.act.held.Load() == 0 && !a.act.quietAt(now, window).After(now) {
			return true
		}
		select {
		case <-tick.C:
		case <-done:
			return false
		case <-a.ctx.Done():
			return false
		}
	}
}

// Environment says what the replay did with the recording's environment
// so far: the changes applied and dropped (a dropped one names its
// reason), the clients under test. nil for a replay that does not answer
// writes.
func (a *Answerer) Environment() *EnvironmentReport {
	if a.env == nil {
		return nil
	}
	env := a.store.Environment()
	r := &EnvironmentReport{Clients: env.Clients, Changes: len(env.Changes), Behaviour: env.Behaviour,
		Requests: env.Requests, Writes: env.Writes}
	for _, c := range a.store.AppliedChanges() {
		if c.Outcome == world.AppliedDropped {
			r.Dropped = append(r.Dropped, c)
		} else {
			r.Applied++
		}
	}
	return r
}

// EnvironmentReport is what Answerer.Environment (replay.Server.Environment)
// returns.
type EnvironmentReport struct {
	// Clients names the clients under test ("all", their selectors, or
	// "none").
	Clients string
	// Changes counts the environment's changes; Applied those applied so
	// far; Dropped those that had nothing to apply to, with why.
	Changes, Applied int
	Dropped          []world.Applied
	// Requests and Writes count the recorded requests and successful
	// writes of the clients under test; Behaviour the versions of objects
	// their writes made (the expected output, left out of the world).
	Requests, Writes, Behaviour int
}

// String is a one-line summary.
func (r *EnvironmentReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "environment: %d of %d changes applied", r.Applied, r.Changes)
	if len(r.Dropped) > 0 {
		fmt.Fprintf(&b, ", %d dropped", len(r.Dropped))
	}
	fmt.Fprintf(&b, "; clients under test (%s): %d recorded requests, %d writes, %d versions left out as their behaviour",
		r.Clients, r.Requests, r.Writes, r.Behaviour)
	return b.String()
}

// WriteText writes the one-line summary and a line for each dropped
// change, for a person.
func (r *EnvironmentReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s.\n", r)
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "  dropped: %s %s %s (recorded at rv %s): %s\n", d.Type, d.Resource.Resource, d.Change.Key, d.Change.RV, d.Reason)
	}
}

// Log is WriteText for a structured log.
func (r *EnvironmentReport) Log(log *slog.Logger) {
	log.Info("replay: environment", "summary", r.String(), "dropped", len(r.Dropped))
	for _, d := range r.Dropped {
		log.Info("replay: dropped", "type", d.Type, "resource", d.Resource.Resource, "key", d.Change.Key, "rv", d.Change.RV, "reason", d.Reason)
	}
}
