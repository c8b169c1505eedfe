package replay

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay/perturb"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// DefaultListen is the address Start and StartTLS listen on when
// Options.Listen is empty: loopback, a free port.
const DefaultListen = "127.0.0.1:0"

// DefaultWriteTimeout is the WriteTimeout a zero Options means.
const DefaultWriteTimeout = 30 * time.Second

// DefaultIdleTimeout is the IdleTimeout a zero Options means: kube-apiserver's
// (k8s.io/apiserver SecureServingInfo.Serve, HTTP/1.1 and HTTP/2 alike), which
// matches the keep-alive timeout of Go's http.DefaultTransport.
const DefaultIdleTimeout = 90 * time.Second

// DefaultCacheBytes is the CacheBytes a zero Options means.
const DefaultCacheBytes = 64 << 20

// DefaultMaxRequests is the MaxRequests a zero Options means.
const DefaultMaxRequests = 100000

// Options configure a Server. The zero value serves as fast as each client
// reads (Speed 0), reproduces the recorded chunk boundaries, ends each
// stream the way it was recorded, listens on 127.0.0.1 (a free port) and
// logs nothing.
type Options struct {
	// Speed scales the recorded timing: 1 replays it as recorded, 10 ten
	// times faster, 0.5 at half speed. 0 (the zero value) sends every byte
	// as soon as the client reads it, with no waiting at all. Negative, NaN
	// and infinite values are an error.
	Speed float64
	// Loop restarts a watch stream that reached its recorded end from its
	// first event, on a timeline shifted by the exchange's recorded
	// duration, forever (until the client's timeoutSeconds, the client
	// leaves, or Close). Per-request cursors (see the package doc) wrap
	// around instead of repeating the last exchange.
	Loop bool
	// Hold keeps every watch stream open after its last recorded byte
	// (and every other body that did not end cleanly), instead of ending it
	// the way it was recorded, until the client's timeoutSeconds (then a
	// clean end, as the apiserver does), the client leaves, or Close.
	Hold bool
	// EventChunks sends one chunk per watch event (and per stored body
	// piece). The zero value reproduces the recorded chunk boundaries, each
	// chunk at its recorded time.
	EventChunks bool
	// Clock is the time source; nil means the wall clock. A FakeClock runs
	// replays in virtual time.
	Clock Clock
	// Logger receives one Info line per request (method, target, how it was
	// answered, exchange, status), warnings for requests nothing matches
	// (with the closest recorded candidates), and Debug lines when streams
	// end. nil discards.
	Logger *slog.Logger
	// Listen is the address Start and StartTLS listen on; "" means
	// DefaultListen (127.0.0.1, a free port).
	Listen string
	// Certificate is the TLS certificate StartTLS serves; nil generates a
	// self-signed ECDSA P-256 certificate for 127.0.0.1, ::1 and localhost
	// (and the Listen host), which is its own CA.
	Certificate *tls.Certificate
	// WriteTimeout bounds how long one write to a client may block (a
	// client that stopped reading); the client is then disconnected. 0 means
	// DefaultWriteTimeout; negative disables the limit.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has waited this long
	// for its next request (over HTTP/2, with no stream open: a GOAWAY
	// first). A connection serving a request — a watch, however quiet —
	// is not idle. 0 means DefaultIdleTimeout; negative disables it.
	IdleTimeout time.Duration
	// CacheBytes bounds the memory holding decoded exchanges (timed writes,
	// synthesized lists) shared by all clients. Exchanges larger than a
	// quarter of it are streamed from the file for each client instead.
	// 0 means DefaultCacheBytes.
	CacheBytes int64
	// Writes says how requests that change the world (POST, PUT, PATCH,
	// DELETE) are answered and what watchers see of them: WritesAnswer
	// (the zero value), WritesApply, WritesReject or WritesRecorded (see
	// the package doc).
	Writes Writes
	// User is who every client of the world is taken to be (a replay
	// authenticates no one): the user SelfSubjectReviews name, self
	// access and rules reviews ask about and CertificateSigningRequests
	// are stamped with. nil means world.DefaultUser, an administrator in
	// system:masters. Not used with WritesRecorded.
	User *authenticationv1.UserInfo
	// StateBytes bounds the memory of the session's world (every version
	// of every object the session shows, and the clients' writes): New
	// fails beyond it. 0 means world.DefaultMaxBytes (1 GiB). Not used
	// with WritesRecorded, which keeps no world.
	StateBytes int64
	// Out, if set, receives every request the clients make and every
	// response the replay sends, as the bytes of an HTTP/1.1 exchange on a
	// connection of its own (see Out): a recording of the run.
	Out Out
	// MaxRequests bounds the requests Server.Requests keeps (the first
	// ones); 0 means DefaultMaxRequests, negative keeps none.
	MaxRequests int
	// AcceptHosts are the hosts Handler serves (regular expressions
	// matched against the Host without its port, as kubectl proxy's
	// --accept-hosts); nil means localhost, 127.0.0.1 and [::1]. Other
	// hosts get 403 Forbidden (DNS rebinding, see guard.go).
	AcceptHosts []string
	// RejectPaths are paths Handler refuses with 403 Forbidden (as kubectl
	// proxy's --reject-paths); nil means exec, attach and portforward of
	// pods, an empty list none.
	RejectPaths []string
	// Metrics, if set, is the Prometheus registry the Server registers
	// its metrics in (wtrace_replay_*: see replay/internal/metrics; Servers sharing a
	// registry share them) and serves at /metrics. nil (the zero value)
	// means no metrics, and /metrics is a path like any other.
	Metrics *prometheus.Registry
	// Control, if set, serves the control endpoint at /wtrace/v1/ (see
	// Control and docs/CONTROL.md): what a test in another process, in
	// any language, drives the replay with. nil (the zero value) serves
	// none: /wtrace/ paths are then a client's like any other.
	Control *Control
	// ShutdownDelay is how long Shutdown goes on serving, with /readyz
	// failing, before it closes the listener and ends the streams — as
	// kube-apiserver's --shutdown-delay-duration: the time a load
	// balancer (a Service's endpoints) takes to see the failed readiness
	// and stop sending new clients, so that none is refused meanwhile. It
	// counts in Shutdown's context. 0 (the zero value) means none.
	ShutdownDelay time.Duration
	// Listener, if set, is what Start and StartTLS serve on instead of
	// listening on Listen (Preloader.Listener, to serve on the port that
	// answered probes while the session loaded); Close closes it once
	// served.
	Listener net.Listener
	// Pace says when the environment's changes are applied to the world
	// of a replay that answers writes: PaceRecorded (the zero value: at
	// their recorded times, scaled by Speed) or PaceQuiet (each once the
	// clients have been quiet for QuietWindow). See the package doc.
	Pace Pace
	// QuietWindow is how long the clients must have been quiet before
	// PaceQuiet applies the next change; 0 means DefaultQuietWindow.
	QuietWindow time.Duration
	// Clients picks the clients under test in the recording (see
	// world.Options.Clients): their writes, and the versions of objects
	// those made, are the expected output of a run and never replayed.
	// nil picks every client of a session recorded through the proxy (or
	// of a replay's run), none of a capture; NoClients picks none.
	Clients   []world.Client
	NoClients bool
	// WriteLatency is how long a replay that answers writes holds a
	// write before it lands in the world (its answer and its watch
	// events then), as an apiserver's write waits for etcd: controllers
	// that race each other and their own caches meet the interleavings
	// they met when recorded. 0 means the median of the recorded writes
	// of the clients under test (a few milliseconds); negative, none.
	WriteLatency time.Duration
	// Perturb makes the run a perturbed one (package replay/perturb):
	// each spec's fault applied at its point, logged, and listed by
	// Perturbations (and in the Summary note of a record.Recorder's
	// file). Only a replay that answers writes (WritesAnswer,
	// WritesApply) takes perturbations.
	Perturb []perturb.Spec
	// ClientRestart restarts the controller under test for a
	// client-restart perturbation, after the replay closed its
	// connections (on a goroutine of its own; ctx ends with the Server).
	// nil runs the spec's exec= command or sends its signal=
	// (perturb.RestartClient).
	ClientRestart func(ctx context.Context, sp perturb.Spec) error
}
