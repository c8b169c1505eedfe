package replay

import (
	"time"

	"github.com/wtrace/wtrace/replay/internal/pace"
)

// Clock is the time source of a Server: when a request arrived and how long
// to wait before the next write. The zero Options use the real clock; tests
// inject a FakeClock to run in virtual time. Implementations must be safe for
// concurrent use.
type Clock = pace.Clock

// Timer is the part of *time.Timer a Server uses. Reset must leave no stale
// value in the channel from before the call (as time.Timer does since Go
// 1.23).
type Timer = pace.Timer

// FakeClock is a Clock whose time moves only when told to: Advance and
// AdvanceTo fire the timers that fall due, in deadline order. Next and
// BlockUntil let a test step from one scheduled write to the next without
// sleeping. Safe for concurrent use.
type FakeClock = pace.FakeClock

// NewFakeClock returns a FakeClock set to start.
func NewFakeClock(start time.Time) *FakeClock { return pace.NewFakeClock(start) }
