// Package plan lists the points of a recording worth perturbing — the
// learning stage of Sieve, read from a session instead of a live run —
// as specs of package replay/perturb that a perturbed replay applies one
// at a time.
//
//	f, err := formats.Open("session.wt", formats.ReaderOptions{})
//	p, err := plan.New(f, plan.Options{Max: 40})
//	for _, sp := range p.Specs {
//		fmt.Println(sp) // wtrace replay --perturb "$sp" …
//	}
//
// or on the command line, one spec a line:
//
//	wtrace perturb plan session.wt
//
// # What is planned
//
// The client under test is the one the recording shows writing most,
// told by its User-Agent's first token (client-go's program name:
// "kube-controller-manager" for each of kcm's controllers), or the one
// whose User-Agent Options.Client matches. Plan.Client is the selector of
// that client (wtrace replay --client, replay.Options.Clients): a replay
// that counts the same writes reaches the same points.
//
// From its requests, in the order the session holds them:
//
//   - each of its writes, as a point where it wrote after observing a
//     state: restart (the apiserver) and error (when=before, the write
//     refused; when=after, its answer lost) at its N-th write
//     (at=write:N), client-restart after the object's first write
//     (after=write:R/NS/NAME), at its K-th write (at=write:K:R/NS/NAME),
//     or at the N-th write of all for a create (whose path names no
//     object) and for the writes of an object it may have created
//     (it created one of that resource in that namespace before: its
//     name may have been generated, and be another in the run);
//   - each resource it watches, at its K-th watch event
//     (at=event:K:R): watch-close, gone (410 Expired, a relist) and
//     skip (the intermediate versions never seen);
//   - each resource it lists: stale (its LIST answered from a lagging
//     watch cache), at the start and at each relist the recording shows
//     (at=write:N, the writes before it);
//   - each resource it updates (PUT): conflict;
//   - run-wide: throttle with seeds 1, 2, …, on all requests and on
//     writes; delay of answers and of events.
//
// Events (events, events.k8s.io) are counted among the writes, as a
// replay counts them, but are no points of their own: their names are
// generated and say nothing of the controller's state.
//
// # The bound
//
// A recording of minutes has thousands of such points; Options.Max
// (DefaultMax) bounds the plan. The bound is shared out among the kinds
// in turn, one at a time, so that each kind gets its share (a kind with
// fewer points leaves the rest to the others); within a kind the points
// kept are spread evenly over the recording (the middle of each of equal
// parts), not its first ones. The same session and Options give the
// same plan: no randomness, no clock.
//
// Specs are de-duplicated (by their text) and ordered by kind
// (perturb.Kinds' order), then by where in the recording they apply.
// Every spec parses back (perturb.Parse(sp.String()) is sp).
//
// New reads the session's index only (request lines and headers, watch
// event counts): no body is read, whatever the session's size. A Plan is
// not changed after New returns; it is safe to read from several
// goroutines.
package plan
