package replay

import (
	"github.com/wtrace/wtrace/internal/hostfilter"
)

// The replay serves only the hosts and paths its Options allow, as kubectl
// proxy does (package internal/hostfilter): by default requests whose Host
// is loopback (localhost, 127.0.0.1, [::1], any port) — a web page whose
// name resolves to 127.0.0.1 (DNS rebinding) gets 403 Forbidden, not the
// session's objects (a --keep-secrets session's Secret values) — and no
// exec, attach or portforward of pods. Handler (and so Start and
// StartTLS) apply it; ServeHTTP itself does not. The Server's own
// endpoints (/livez, /readyz, /healthz, /metrics: health.go) are served
// whatever the Host: probes and scrapes name a pod by its address, and no
// session data lies behind them.

// newGuard compiles Options.AcceptHosts and Options.RejectPaths.
func newGuard(acceptHosts, rejectPaths []string) (*hostfilter.Filter, error) {
	return hostfilter.New(acceptHosts, rejectPaths)
}
