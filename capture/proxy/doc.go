// Package proxy is the reverse proxy of `wtrace record --proxy`: like
// kubectl proxy, it listens on loopback, takes plain HTTP/1.1 (or HTTPS:
// HTTP/2 to clients that offer it in ALPN, as client-go does, HTTP/1.1 to
// the others) from clients, and forwards every request to the apiserver of a
// kubeconfig context with that context's credentials (client
// certificates, tokens, exec plugins, through client-go's transport;
// upstream may speak HTTP/2).
//
// With Options.Tee set, every client connection is recorded: the
// listener wraps each accepted connection (after TLS, so the bytes are
// plaintext) and hands every byte read from or written to the client to a
// capture.TeeConn, stamped with the time of the read or write. The session
// therefore holds exactly the wire view of what the proxy sent its client:
// headers, chunk boundaries as net/http wrote them (HTTP/2: each stream an
// exchange, each DATA frame a chunk, parsed as from a capture), one chunk
// per read from upstream (the proxy flushes after each), and their times.
// Since net/http does not see a wrapped connection as TLS, the listener
// completes each handshake itself (in a goroutine per connection) and
// serves the connections that chose h2 with an http2.Server. The
// proxy's own upstream credentials never pass through the tee; the
// client's Authorization header does, and is redacted like any other.
//
// Like kubectl proxy, it serves only requests whose Host is loopback
// (localhost, 127.0.0.1, [::1], any port; Options.AcceptHosts widens it)
// and refuses exec, attach and portforward (Options.RejectPaths), with
// kubectl proxy's regular expressions (package internal/hostfilter): a
// web page whose name resolves to 127.0.0.1 (DNS rebinding) gets 403
// Forbidden, not what the kubeconfig's credentials can fetch. A refused
// request is not forwarded; the tee still records its bytes (the 403).
//
// Shutdown ends the proxy as kube-apiserver and wtrace replay end: every
// watch it proxies at its next event boundary with a clean terminator
// (the terminating chunk; END_STREAM after a GOAWAY), so that its client
// re-watches and the recording holds whole events (drain.go).
//
// Record runs a whole recording (`wtrace record --proxy`): the proxy, a
// capture.Tee and the formats.FileSink that owns the session files, until
// its context is done, a limit is reached or writing fails. The package is
// a recording source beside capture/live, free of CLI concerns: cmd/wtrace
// wires it to flags and signals.
package proxy
