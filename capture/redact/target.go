package redact

import (
	"net/url"
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// credentialWords mark a query parameter name (or userinfo) as a
// credential when its decoded, lower-cased name contains one: OAuth's
// access_token and id_token, token, password, client_secret, api_key,
// X-Amz-Signature, sessionid, auth…  Kubernetes' own parameters (watch,
// resourceVersion, continue, labelSelector, …) contain none.
var credentialWords = []string{"token", "secret", "passw", "auth", "key", "credential", "signature", "session", "cookie", "bearer", "jwt"}

// credentialName reports whether a query parameter name is a credential.
func credentialName(name string) bool {
	if strings.HasPrefix(name, ":") {
		return false // HTTP/2 pseudo-headers (:authority names a host)
	}
	n := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// credentialValue reports whether a header or query value looks like a
// credential whatever its name: an Authorization scheme with credentials
// (RFC 9110 §11.4: Bearer, Basic, Digest, Negotiate, …), Kubernetes'
// websocket bearer subprotocol, or a JSON Web Token.
func credentialValue(v string) bool {
	l := strings.ToLower(strings.TrimSpace(v))
	for _, s := range []string{"bearer ", "basic ", "digest ", "negotiate ", "ntlm ", "token ", "aws4-hmac-sha256 "} {
		if strings.HasPrefix(l, s) && len(strings.TrimSpace(l[len(s):])) > 0 {
			return true
		}
	}
	if strings.Contains(l, "bearer.authorization.k8s.io") || strings.Contains(l, " bearer ") || strings.Contains(l, ",bearer ") {
		return true
	}
	return looksJWT(v)
}

// looksJWT reports whether v holds a JSON Web Token (RFC 7519): three
// base64url parts, the first two starting with "eyJ" ('{"' encoded).
func looksJWT(v string) bool {
	i := strings.Index(v, "eyJ")
	for i >= 0 {
		rest := v[i:]
		parts := strings.SplitN(rest, ".", 3)
		if len(parts) == 3 && strings.HasPrefix(parts[1], "eyJ") && len(parts[0]) >= 10 {
			return true
		}
		j := strings.Index(rest[3:], "eyJ")
		if j < 0 {
			return false
		}
		i += 3 + j
	}
	return false
}

// Target redacts a request-target (RFC 9112 §3.2): the value of every
// query parameter whose name marks a credential or whose value looks like
// one, and the userinfo of an absolute-form target. Values are replaced
// in place by a placeholder of the same length, so the target keeps its
// shape and length; the path is kept. It returns target itself when
// nothing is replaced. This happens whatever the redaction mode:
// --keep-secrets never keeps credentials.
func Target(target string, rep *Report) string {
	out := []byte(nil)
	set := func(s, e int, what string) {
		if out == nil {
			out = []byte(target)
		}
		fill(out[s:e], "redacted")
		rep.add(formats.RedactQuery, "request-target", what, 1, int64(e-s))
	}
	// Userinfo of an absolute-form target: scheme://user:pass@host/…
	if i := strings.Index(target, "://"); i >= 0 {
		auth := target[i+3:]
		if j := strings.IndexAny(auth, "/?#"); j >= 0 {
			auth = auth[:j]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			set(i+3, i+3+at, "userinfo")
		}
	}
	q := strings.IndexByte(target, '?')
	if q >= 0 {
		i := q + 1
		for i <= len(target) {
			j := strings.IndexAny(target[i:], "&;#")
			end := len(target)
			if j >= 0 {
				end = i + j
			}
			param := target[i:end]
			name, val, hasVal := strings.Cut(param, "=")
			dn, err := url.QueryUnescape(name)
			if err != nil {
				dn = name
			}
			dv, err := url.QueryUnescape(val)
			if err != nil {
				dv = val
			}
			if hasVal && len(val) > 0 && (credentialName(dn) || credentialValue(dv)) {
				vs := i + len(name) + 1
				set(vs, end, "query "+clipField(dn))
			}
			if end == len(target) || target[end] == '#' {
				break
			}
			i = end + 1
		}
	}
	if out == nil {
		return target
	}
	return string(out)
}

// SecretPath reports whether a request-target addresses Secrets: its
// path, percent-decoded, has a segment "secrets" (in any case). Bodies
// sent there are redacted as Secrets whatever they hold (BodyOptions.
// AssumeSecret). A path that does not decode counts as one (fail closed)
// if it mentions secrets in any form.
func SecretPath(target string) bool {
	path := target
	if i := strings.Index(path, "://"); i >= 0 {
		path = path[i+3:]
		if j := strings.IndexByte(path, '/'); j >= 0 {
			path = path[j:]
		}
	}
	path, _, _ = strings.Cut(path, "?")
	dec, err := url.PathUnescape(path)
	if err != nil {
		return strings.Contains(strings.ToLower(path), "secret") || strings.Contains(path, "%")
	}
	for _, seg := range strings.Split(dec, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if strings.EqualFold(seg, "secrets") {
			return true
		}
	}
	return false
}
