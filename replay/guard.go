package replay

import (
	"net/http"

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
func newGuard(opts Options) (*hostfilter.Filter, error) {
	return hostfilter.New(opts.AcceptHosts, opts.RejectPaths)
}

// guard puts the filter in front of h: a refused request gets 403
// Forbidden, and a warning in the log saying why.
func (s *Server) guard(h http.Handler) http.Handler {
	filtered := s.filter.Wrap(h, s.log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.ops != nil && s.ops.endpoints.Owns(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		filtered.ServeHTTP(w, r)
	})
}
