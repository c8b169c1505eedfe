// Package progress is the one-line status a long command shows on a
// terminal ("12.3 MiB read (40%)  1200 packets …"): each Show replaces the
// line, at most five times a second; Clear removes it so that other lines
// can be printed. Standard library only (layer 0).
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Every is the least time between two lines shown.
const Every = 200 * time.Millisecond

// Line is a status line on a terminal. A nil *Line does nothing, so that a
// command shows progress only where there is a terminal. Safe for
// concurrent use.
type Line struct {
	w     io.Writer
	now   func() time.Time
	mu    sync.Mutex
	last  time.Time
	shown bool
}

// New returns a Line writing to w, or nil when w is not a terminal (the
// caller says: cmd/wtrace asks golang.org/x/term).
func New(w io.Writer, terminal bool) *Line {
	if !terminal {
		return nil
	}
	return &Line{w: w, now: time.Now}
}

// Show replaces the status line with the formatted text, unless a line was
// shown less than Every ago.
func (p *Line) Show(format string, a ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.now(); now.Sub(p.last) >= Every {
		p.last = now
		fmt.Fprintf(p.w, "\r\033[K"+format, a...)
		p.shown = true
	}
}

// Clear removes the status line, if one is shown.
func (p *Line) Clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
