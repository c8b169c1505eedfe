// Package fromworld is the world's answers: a request answered from the
// session's world (package apiserver/world) as kube-apiserver would when
// it arrives. For every replay that keeps a world: the world's watches
// (a watch of parameters the recording lacks, resumed from a
// resourceVersion it does not show; each parked on the scheduler's path
// between its events, woken by the world's changes through a
// stream.Waker, its events encoded once per scope and encoding) and the
// reads the recording cannot answer; a read-only replay's 403 for
// writes. For a Live world (replay's WritesAnswer) every read and write
// of a resource, each write landing after the apiserver's latency and
// answered once its watch events went out (deliveries), while the
// environment's driver applies the recording's environment at its pace
// (Pace: recorded, or once the clients are quiet, which Begin follows).
//
// Contract: the Answerer decides an answer (a stream.Answer) and its
// Serve writes it through the request's stream; nothing here reads the
// recorded exchanges (package replay/internal/fromtape, above it, asks
// the world for what the recording lacks). Safe for concurrent use; the
// environment's driver is a goroutine that ends with the server's
// context (Wait).
//
// It is internal to package replay, which routes a Live world's
// requests here first.
package fromworld
