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
