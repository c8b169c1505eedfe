// Package discovery is the discovery documents a replay serves when the
// session did not record them (/api, /apis, /api/v1,
// /apis/<group>[/<version>], /version): with a world, kube-apiserver
// v1.33's own (legacy and aggregated, package apiserver/world's copy) and
// the session's custom resources added; without one, the resources of the
// recorded requests, with their kinds (from their objects, the world's
// built-in table, or well-known names) and scopes, and the read verbs.
// /version is v1.33's.
//
// Contract: New reads the session once (a LIST body at most 16 MiB, for
// its kind) and builds every document; Docs is immutable afterwards and
// safe for concurrent use. Without a world the documents are the legacy
// (unaggregated) ones, served as plain application/json, to which clients
// asking for aggregated discovery fall back. Recorded discovery is the replay's to
// serve; this package answers only what the session lacks.
//
// It is internal to package replay (route.go decides when it answers).
package discovery
