// Package hostfilter is kubectl proxy's request filter
// (k8s.io/kubectl/pkg/proxy FilterServer) for the servers wtrace runs on
// loopback: `record --proxy`, which forwards requests with the
// kubeconfig's credentials, and `replay`, which serves what a session
// holds. It refuses
//
//   - requests whose Host is not one the server expects: a web page on
//     another site whose name resolves to 127.0.0.1 (DNS rebinding) makes
//     the browser send requests with that site's Host, and would otherwise
//     read what the server answers;
//   - requests to paths that run commands in containers or open ports to
//     them (exec, attach, portforward; their websocket upgrades are requests
//     to the same paths), unless asked.
//
// Regular expressions are kubectl proxy's (--accept-hosts,
// --reject-paths): Go syntax (regexp), matched anywhere unless anchored, a
// list separated by commas on the command line (Split). Hosts are
// matched without their port, an IPv6 address in brackets ("[::1]", also
// with a port, which kubectl proxy's "^\[::1\]$" misses). Paths are
// matched as given and cleaned (path.Clean: "//api/…" is "/api/…").
//
// Standard library only (layer 0).
package hostfilter

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"regexp"
	"strings"
)

// DefaultAcceptHosts are the hosts served by default: loopback by name
// and address (kubectl proxy's --accept-hosts default).
const DefaultAcceptHosts = `^localhost$,^127\.0\.0\.1$,^\[::1\]$`

// DefaultRejectPaths are the paths refused by default: kubectl proxy's
// --reject-paths default (exec, attach) and portforward.
const DefaultRejectPaths = `^/api/.*/pods/.*/exec,^/api/.*/pods/.*/attach,^/api/.*/pods/.*/portforward`

// Split splits a comma-separated list of regular expressions as kubectl
// proxy does; "" gives an empty list (not nil: nothing, rather than the
// default).
func Split(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// Filter decides which requests a server answers. Safe for concurrent
// use.
type Filter struct {
	hosts, paths []*regexp.Regexp
	hostsText    string
}

// New returns a Filter serving requests whose host matches one of
// acceptHosts and whose path matches none of rejectPaths. nil means the
// default (Split(DefaultAcceptHosts), Split(DefaultRejectPaths)); an
// empty list accepts no host, or rejects no path.
func New(acceptHosts, rejectPaths []string) (*Filter, error) {
	if acceptHosts == nil {
		acceptHosts = Split(DefaultAcceptHosts)
	}
	if rejectPaths == nil {
		rejectPaths = Split(DefaultRejectPaths)
	}
	f := &Filter{hostsText: strings.Join(acceptHosts, ",")}
	var err error
	if f.hosts, err = compile("accept-hosts", acceptHosts); err != nil {
		return nil, err
	}
	if f.paths, err = compile("reject-paths", rejectPaths); err != nil {
		return nil, err
	}
	return f, nil
}

func compile(what string, exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	for _, e := range exprs {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("hostfilter: %s %q: %w", what, e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Host returns the host of a Host header (or HTTP/2 :authority) as the
// filter matches it: without its port, an IPv6 address in brackets.
func Host(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport // no port
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return host
}

// Check returns nil if r may be served, else why not (for the log).
func (f *Filter) Check(r *http.Request) error {
	p := r.URL.Path
	clean := p
	if len(f.paths) > 0 {
		if !strings.HasPrefix(clean, "/") {
			clean = "/" + clean
		}
		clean = path.Clean(clean) // no copy when already clean
	}
	for _, re := range f.paths {
		if re.MatchString(p) || clean != p && re.MatchString(clean) {
			return fmt.Errorf("path %q is refused (reject-paths %s)", p, re)
		}
	}
	host := Host(r.Host)
	for _, re := range f.hosts {
		if re.MatchString(host) {
			return nil
		}
	}
	return fmt.Errorf("host %q is not accepted (accept-hosts %s)", host, f.hostsText)
}

// Wrap returns h behind the filter: a refused request gets what kubectl
// proxy answers, 403 Forbidden (text), and a Warn line on log (nil: none)
// saying why and which flag serves it. A nil Filter returns h.
func (f *Filter) Wrap(h http.Handler, log *slog.Logger) http.Handler {
	if f == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f.Check(r); err != nil {
			if log != nil {
				log.Warn("refused", "method", r.Method, "target", r.URL.RequestURI(), "host", r.Host, "why", err.Error(),
					"hint", "--accept-hosts serves other hosts, --reject-paths '' every path")
			}
			http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
