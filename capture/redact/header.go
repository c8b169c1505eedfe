package redact

import (
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// secretHeaders are header fields whose values are credentials (RFC 9110
// §11.6.2 Authorization, §11.7.2 Proxy-Authorization; RFC 6265 Cookie and
// Set-Cookie) or commonly carry them.
var secretHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"set-cookie":          true,
	"x-auth-token":        true,
	"x-api-key":           true,
	"x-csrf-token":        true,
	// Kubernetes' websocket clients pass the bearer token as a subprotocol
	// ("base64url.bearer.authorization.k8s.io.<token>").
	"sec-websocket-protocol": true,
}

// IsSecret reports whether a header field must not be stored: a field
// named above, a field whose name holds a credential word (token, secret,
// password, auth, key, …: X-Vault-Token, X-Amz-Security-Token,
// WWW-Authenticate), or a value that looks like a credential (an
// Authorization scheme with credentials such as "Bearer …" or "Basic …",
// Kubernetes' websocket bearer subprotocol, a JSON Web Token).
func IsSecret(name, value string) bool {
	return secretHeaders[strings.ToLower(name)] || credentialName(name) || credentialValue(value)
}

// Header returns the header field to store for name: value. A credential
// keeps its name and length only; this happens whatever the redaction
// mode (--keep-secrets never keeps credentials).
func Header(name, value string) formats.Header {
	if IsSecret(name, value) {
		return formats.Header{Name: name, Redacted: true, Len: len(value)}
	}
	return formats.Header{Name: name, Value: value}
}
