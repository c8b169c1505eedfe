package pace

import (
	"context"
	"testing"
	"time"
)

func TestFakeClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFakeClock(start)
	a := c.NewTimer(3 * time.Second)
	b := c.NewTimer(time.Second)
	if n := c.Waiters(); n != 2 {
		t.Fatalf("Waiters() = %d; want 2", n)
	}
	if next, ok := c.Next(); !ok || !next.Equal(start.Add(time.Second)) {
		t.Fatalf("Next() = %v, %v; want start+1s", next, ok)
	}
	c.Advance(2 * time.Second)
	select {
	case at := <-b.C():
		if !at.Equal(start.Add(time.Second)) {
			t.Errorf("timer b fired with %v; want start+1s (its deadline)", at)
		}
	default:
		t.Fatal("timer b did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("timer a fired early")
	default:
	}
	if got := c.Now(); !got.Equal(start.Add(2 * time.Second)) {
		t.Errorf("Now() = %v; want start+2s", got)
	}
	// Reset drains a value that was not received.
	c.AdvanceTo(start.Add(3 * time.Second))
	a.Reset(time.Second)
	select {
	case <-a.C():
		t.Fatal("a stale value survived Reset")
	default:
	}
	a.Stop()
	if n := c.Waiters(); n != 0 {
		t.Errorf("Waiters() after Stop = %d; want 0", n)
	}
	// Reset(0) fires at once; BlockUntil sees armed timers.
	a.Reset(0)
	if _, ok := <-a.C(); !ok {
		t.Fatal("closed channel")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(time.Millisecond)
		c.NewTimer(time.Hour)
	}()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := c.BlockUntil(ctx, 5); err == nil {
		t.Error("BlockUntil with a cancelled context returned nil")
	}
	// Time never goes backwards.
	now := c.Now()
	c.AdvanceTo(now.Add(-time.Hour))
	if !c.Now().Equal(now) {
		t.Errorf("AdvanceTo(the past) moved the clock to %v", c.Now())
	}
}
