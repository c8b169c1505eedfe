// Package perturb describes perturbed replays: faults a replay that
// answers writes applies on the wire, at chosen points, to the clients
// under test — what real clusters do to controllers (Sieve's and Acto's
// bug classes) — with no change to the controller and the same served
// sequence on every run of the same spec.
//
//	specs, err := perturb.ParseAll([]string{"watch-close:resource=pods,at=event:3", "error:when=after"})
//	srv, err := replay.Open("session.wt", replay.Options{Perturb: specs})
//
// or on the command line, repeatable:
//
//	wtrace replay --perturb watch-close:resource=pods,at=event:3 --perturb gone:at=write:2 session.wt
//
// # Specs
//
// A spec is KIND[:KEY=VALUE,...]. The kinds:
//
//	watch-close  end the open watch streams (resource=R: of one resource) cleanly, or mode=reset by a connection reset
//	gone         the open watches (of resource=R) end with an ERROR event, 410 Expired: the client relists
//	stale        the next LIST from the watch cache (resourceVersion=0; count=N of them) is answered from the world
//	             as it was changes=N changes (default 1) or age=D earlier, with that moment's resourceVersion, as
//	             from a lagging watch cache
//	skip         the open watches end; each re-watch is held for=D (default 2s), then resumes past the intermediate
//	             versions: one event per object that changed meanwhile, its latest state (the unobserved states)
//	restart      the apiserver restarts: every connection closed, /readyz failing and new connections refused for
//	             for=D (default 2s), then served from the same world
//	throttle     429 with Retry-After (retry-after=S, default 1) on share=F (default 0.1) of the requests (on=all,
//	             reads or writes; for=D of them), chosen by seed=N; a client that retries sooner is a difference
//	error        code=500, 503 (the default) or 504 on the write at the point (default at=write:1; count=N
//	             writes): when=before, the write is refused; when=after, it is applied and its answer lost
//	conflict     409 Conflict on the first update (PUT) of each object (of resource=R; count=N objects)
//	delay        latency for=D (default 200ms) on every answer (on=answers) or watch event (on=events)
//	client-restart  the replay closes the clients' connections and hands over to the harness to restart the
//	             controller: Options.ClientRestart in the Go API; exec=CMD (sh -c, the rest of the spec) or
//	             signal=NAME,pid=N on the command line
//
// # Points
//
// Every kind applies from a point: the replay's start when none is given
// (error: the first write), at=DURATION after the start, at=event:N[:R]
// once the replay sent the N-th watch event (of resource R), at=write:N
// (or at=write:N:R, at=write:N:R/NS/NAME, R/NAME for a cluster-scoped
// object) once the N-th write of the clients under test (of R, of that
// object) was answered — error and conflict apply to that write itself —
// and after=write:R/NS/NAME, the same as at=write:1:R/NS/NAME. Points
// count events and writes, not time, where they can: the same spec
// perturbs the same step of the run whatever the machine's speed.
//
// # Plans and runs
//
// Package replay/perturb/plan lists the points of a recording worth
// perturbing (wtrace perturb plan); package replay/perturb/runner runs a
// controller under each spec and judges each run (wtrace perturb run).
//
// # Judging a run
//
// A perturbed run is judged by where it ends (package diff's end state:
// every object the clients wrote, as in the recording) and whether it gets
// there (the run settles); the retries and extra attempts the
// perturbation itself causes are not differences. Each perturbation
// applied is logged (the replay's Logger, at Info) and listed in the
// run's Summary note (replay --out; Applied lines, see ParseApplied), so
// that the diff report names the perturbation that preceded the first
// difference.
package perturb
