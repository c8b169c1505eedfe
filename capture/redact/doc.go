// Package redact keeps credentials out of session files. Every record
// source (packet captures, live capture, the recording proxy) goes through
// it, in package capture's exchange builder, before anything reaches a
// formats.Writer.
//
// # What is removed
//
// Always, whatever the mode (wtrace record --keep-secrets does not change
// these):
//
//   - Header values (Header): Authorization, Proxy-Authorization, Cookie,
//     Set-Cookie, X-Auth-Token, X-Api-Key, X-CSRF-Token,
//     Sec-WebSocket-Protocol; any field whose name contains token, secret,
//     passw, auth, key, credential, signature, session, cookie, bearer or
//     jwt (X-Vault-Token, WWW-Authenticate…); any value that is an
//     Authorization scheme with credentials (Bearer, Basic, Digest,
//     Negotiate, NTLM, Token, AWS4-HMAC-SHA256), Kubernetes' websocket
//     bearer subprotocol, or a JSON Web Token. Only the name and the
//     value's length are kept. HTTP/2 fields the sender marked
//     never-indexed are removed too (package capture).
//   - Request-target credentials (Target): the value of every query
//     parameter whose decoded name contains one of the words above
//     (access_token, token, id_token, client_secret, api_key, …) or whose
//     value looks like a credential, and the userinfo of an absolute-form
//     target. Replaced in place, same length; the path is kept.
//
// By default (a Secrets in use; --keep-secrets keeps these), in bodies,
// watch events and the partial events at the end of cut streams:
//
//   - Secret data and stringData values, in every shape a Secret takes: an
//     object of kind Secret anywhere (a GET, a watch event, an item of a v1
//     List, a Table row's object, an AdmissionReview's object, an object
//     embedded in a ControllerRevision or a custom resource), the items of
//     a SecretList (which carry no kind), a SecretList nested in a List.
//     ServiceAccount token, bootstrap token, docker config, TLS and Helm
//     release Secrets are Secrets like any other.
//   - The kubectl.kubernetes.io/last-applied-configuration annotation,
//     which copies the object as applied: a Secret's, always; any other
//     object's (a custom resource embedding a Secret, a
//     PartialObjectMetadata of metadata-only informers and Table rows, an
//     object without a kind), if the annotation's own content is a
//     Secret, holds one, or cannot be parsed — in JSON, CBOR, and the
//     ObjectMeta of protobuf objects (whole, in events, streamed).
//   - TokenRequest status.token (kubectl create token) and TokenReview
//     spec.token.
//   - Secrets quoted in text: a string value (an Event's message, a
//     condition's, an annotation; in JSON, CBOR, or a protobuf typed
//     message, whose string field is found without its schema) that
//     names a Secret is read as text: every JSON value in it is walked by
//     these rules, its kindless objects taken as the Secret's (a patch an
//     apply's report quotes), in place; if the text names the kind Secret
//     as a manifest does (kind: Secret, "kind":"Secret", Kind:Secret,
//     &Secret{, letters escaped or not) anywhere outside a JSON value
//     that parsed — YAML, a manifest cut short, Go's %v — the whole string
//     is replaced (fail closed). Strings quoted in strings are followed
//     8 levels deep.
//   - In a body sent to a Secret endpoint (SecretPath: a path whose
//     percent-decoded segment is "secrets"): an object without a kind is a
//     Secret (a merge or strategic-merge patch, an apply), and every value
//     a JSON patch (RFC 6902) sets is replaced.
//
// Each value is replaced by a placeholder of exactly its length (see
// Secrets), so JSON, protobuf and CBOR framing (a CBOR string's head
// encodes its length), Content-Length, chunk boundaries and offsets stay
// valid, base64 stays base64 of the same decoded length, and replay
// serves objects clients still decode.
//
// # What is kept
//
// Everything else, byte for byte: the keys of Secret data, names, labels,
// other annotations, types, resourceVersions; ConfigMaps, even when they
// hold a kubeconfig or a password (a ConfigMap is not a credential store
// by contract); environment variables of Pods; CertificateSigningRequest
// status.certificate (a certificate is public; the private key never
// reaches the apiserver); the last-applied-configuration of objects that
// hold no Secret; pod logs and exec/attach streams; the Table cells of
// Secrets (name, type, number of keys, age).
//
// # Deciding by content, failing closed
//
// What a body is decides, never only the request path, and a body whose
// request was not captured is read the same way. Body picks its parser by
// how the body begins (a JSON value, the "k8s\x00" protobuf envelope) and
// the Content-Type (YAML, CBOR, text, forms); on an exchange whose path
// addresses Secrets (BodyOptions.SecretPath) a body is judged whatever its
// Content-Type says (JSON served as text is read as JSON; text or untyped
// bodies that are not JSON are held as YAML is). Elsewhere a text body (a
// log, what a service's or a pod's proxy serves as text/plain) is read as
// text holding JSON: a value that begins an object or an array at the top
// level is walked like any JSON body (a Secret's JSON is a Secret wherever
// it comes from), other lines are text, and a value that stops parsing
// replaces the rest of its line only if that may hold a credential. JSON is read by a streaming walker
// that finds kinds, lists, Table rows, metadata-only objects, watch event
// wrappers and nested lists at any depth, holding back only values whose
// object's kind has not been seen yet (kind after data, a list's kind
// after its items); protobuf by the envelope's kind (Secret, SecretList,
// List, PartialObjectMetadata(List), ControllerRevision(List),
// TokenRequest, TokenReview, WatchEvent are parsed; any other kind is a
// typed message that can hold a Secret only inside a nested envelope,
// which is found wherever it is). CBOR (application/cbor bodies, which
// Kubernetes 1.32+ serves to clients that prefer it, and the events of
// application/cbor-seq watches) is one data item, read whole with
// internal/cborscan and walked by the JSON walker's rules: the kind of
// every map is read before its members, whatever their order (the
// apiserver writes "kind" last); Secret data values are byte strings
// tagged 22, replaced in place, their heads kept.
//
// The fail-closed rule: bytes that may hold a credential and cannot be
// parsed are replaced whole, same length, and reported
// (formats.RedactUnparsed, an Anomaly in the session): JSON that is
// malformed or nested deeper than MaxDepth (from where parsing stopped),
// a body or event cut before an object's kind was seen (its waiting
// values), a body whose beginning was not captured or that lost bytes
// (from the gap on), protobuf that does not parse, CBOR that is not one
// well-formed item, names a kind twice differently, nests deeper than 64
// (Kubernetes' own CBOR decoder stops there) or holds a Secret value that
// is not a string (each replaced by a CBOR byte string of its length, so
// what holds it stays well-formed), a cut CBOR body, YAML bodies (and
// text or untyped ones on a Secret path) that mention a secret or a token
// or hold what could spell one unseen (this package does not parse YAML: a
// backslash escape, a tag such as !!binary, a NUL or a byte-order mark of
// UTF-16), form-encoded bodies (no Kubernetes API takes one; kube-apiserver
// answers 415), a body to a Secret endpoint in a form it cannot parse, a
// body larger than the limits below, a content or transfer coding that
// cannot be decoded (package capture: a body's transfer codings, "gzip,
// chunked", are read through like content codings). A partial protobuf or
// CBOR event is always replaced. Repeated members are taken as the
// apiserver's decoder takes them, the last one: an object's values wait
// for its end and are decided by its last "kind"; a list whose "kind"
// changes after its kindless items were decided by the first fails closed
// from there.
//
// # Limits and memory
//
// A JSON body streams: the walker holds only bytes from the first value
// whose fate is not known yet (an object's values wait for its end, where
// its last kind decides), at most MaxHold (16 MiB; past it those values
// are replaced). Protobuf objects of the kinds above are held whole, at
// most MaxHoldWhole (64 MiB; past it replaced), as are YAML, CBOR and
// form bodies; other protobuf kinds stream a top-level field of their
// raw message at a time (a list's item, at most MaxHoldWhole), each held
// until whole and walked (nested envelopes, annotations, quoted Secrets);
// where those fields do not parse the rest streams, holding only the
// value of a last-applied-configuration annotation until it is whole. A
// CBOR item
// that names none of Secret, TokenRequest or TokenReview and has no
// indefinite-length string (which could split such a word into chunks)
// is returned untouched without being walked. Nesting is bounded by
// MaxDepth. Watch events are redacted whole (at most 16 MiB, the frame
// limit) and copied only when something is replaced; an event that names
// none of Secret, TokenRequest or TokenReview (and hides no letter
// behind a \u escape) is returned untouched without being parsed.
//
// # Concurrency
//
// Secrets is safe for concurrent use; a Body and a Report are used by
// one goroutine.
package redact
