// Package redact keeps credentials and Secret values out of session files.
//
// Header values that carry credentials are never stored: Header returns
// them with Redacted set and only their length kept. Every record source
// (packet captures, the proxy) goes through this package before anything
// reaches a formats.Writer.
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

// IsSecret reports whether a header field's value must not be stored.
func IsSecret(name string) bool {
	return secretHeaders[strings.ToLower(name)]
}

// Header returns the header field to store for name: value.
func Header(name, value string) formats.Header {
	if IsSecret(name) {
		return formats.Header{Name: name, Redacted: true, Len: len(value)}
	}
	return formats.Header{Name: name, Value: value}
}
