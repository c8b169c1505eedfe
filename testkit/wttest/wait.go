package wttest

import (
	"fmt"
	"testing"
	"time"
)

// WaitFor polls cond every few milliseconds until it holds, and fails t
// (naming what it waited for, and for how long) if it still does not after
// d: tests fail, they never hang.
func WaitFor(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: still waiting for %s", d, fmt.Sprintf(format, args...))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitStill polls n every few milliseconds until its value has not changed
// for still, and fails t (naming what it waited for) if that does not
// happen within d: "the controller goes quiet", n counting its calls.
func WaitStill(t testing.TB, d, still time.Duration, n func() int, format string, args ...any) {
	t.Helper()
	last, since := n(), time.Now()
	WaitFor(t, d, func() bool {
		if v := n(); v != last {
			last, since = v, time.Now()
		}
		return time.Since(since) > still
	}, format, args...)
}
