// Package discovery is the discovery documents a replay synthesizes when
// the session did not record them (/api, /apis, /api/v1,
// /apis/<group>[/<version>], /version): the resources of the recorded
// requests, with their kinds (from their objects, the world's built-in
// table, or well-known names) and scopes, and the verbs a replay answers
// (get, list and watch; every verb when it keeps a world).
//
// Contract: New reads the session once (a LIST body at most 16 MiB, for
// its kind) and builds every document; Docs is immutable afterwards and
// safe for concurrent use. Documents are the legacy (unaggregated) ones,
// served as plain application/json, to which clients asking for
// aggregated discovery fall back. Recorded discovery is the replay's to
// serve; this package answers only what the session lacks.
//
// It is internal to package replay (route.go decides when it answers).
package discovery
