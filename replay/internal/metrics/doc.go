// Package metrics is a replay server's Prometheus metrics (its
// Options.Metrics registry; names wtrace_replay_*): requests by verb,
// group, resource, code, how they were answered and why their bytes are
// not the recorded ones; open watchers and connections; watch events sent
// and their lateness against the recorded schedule; bytes sent; writes
// applied; sessions loaded.
//
// The serving code calls a few hooks of *Metrics, each a no-op on a nil
// receiver (no registry: no metrics, and nothing but a nil check on the
// serving path):
//
//   - Opened and Answered, when a request arrives and when its answer is
//     over (replay's route.go): requests, open watchers, writes applied.
//   - Events, Late: watch events going out and their lateness (replay's
//     streamer.wrote and sentEvents: serve.go runFrom, flow.go).
//   - SentBytes: bytes handed to a connection (out.go through net/http,
//     conn.go on a taken-over connection).
//   - ConnState, ConnOpened, ConnClosed: client connections (server.go's
//     ConnState, conn.go for the connections a stream takes over).
//   - Loaded: a session loaded (health.go, at the end of New).
//
// Contract: safe for concurrent use; a client choosing any request path
// cannot grow the label set past maxResourceLabels resources (then
// "other"). Request paths are read as kube-apiserver's RequestInfoFactory
// reads them.
//
// It is internal to package replay.
package metrics
