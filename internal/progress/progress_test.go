package progress

import (
	"bytes"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, true)
	clock := time.Unix(1000, 0)
	p.now = func() time.Time { return clock }
	p.Show("a %d", 1)
	p.Show("b") // within Every: not shown
	clock = clock.Add(Every)
	p.Show("c")
	p.Clear()
	p.Clear() // nothing shown: nothing to clear
	if got, want := b.String(), "\r\033[Ka 1\r\033[Kc\r\033[K"; got != want {
		t.Errorf("wrote %q; want %q", got, want)
	}
	var nothing *Line = New(&b, false)
	nothing.Show("x")
	nothing.Clear()
	if nothing != nil {
		t.Error("New(…, false) is not nil")
	}
}
