// Package logline is a log/slog handler for people reading a terminal:
// one short line per record, "12:03:04.512 GET /api/v1/… how=recorded
// exchange=1 status=200" — the time, the level unless Info, the message
// (its prefix and a message meaning "nothing to say" left out), the values
// of some attributes bare, the others key=value. `wtrace replay` logs each
// request so. Standard library only (layer 0).
package logline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Options say how records are shortened. The zero value writes every
// message and every attribute as key=value.
type Options struct {
	// Level is the least level written.
	Level slog.Level
	// TrimPrefix is left out of messages ("replay: ").
	TrimPrefix string
	// Silent is a message left out altogether ("request"): its attributes
	// say it all.
	Silent string
	// Bare are the keys whose values are written without their key
	// ("method", "target").
	Bare []string
}

// Handler writes records as lines to one writer. Safe for concurrent use;
// handlers made by WithAttrs share the writer and its lock.
type Handler struct {
	w     io.Writer
	opts  Options
	mu    *sync.Mutex
	attrs []slog.Attr
}

// New returns a Handler writing to w.
func New(w io.Writer, opts Options) *Handler {
	return &Handler{w: w, opts: opts, mu: &sync.Mutex{}}
}

func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.opts.Level }

func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.Format("15:04:05.000"))
	if r.Level != slog.LevelInfo {
		b.WriteString(" " + r.Level.String())
	}
	if msg := strings.TrimPrefix(r.Message, h.opts.TrimPrefix); msg != h.opts.Silent || msg == "" {
		b.WriteString(" " + msg)
	}
	write := func(a slog.Attr) bool {
		v := a.Value.Resolve()
		if slices.Contains(h.opts.Bare, a.Key) {
			b.WriteString(" " + v.String())
		} else {
			fmt.Fprintf(&b, " %s=%v", a.Key, v.Any())
		}
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clone(h.attrs), as...)
	return &c
}

// WithGroup returns h: groups are not shown.
func (h *Handler) WithGroup(string) slog.Handler { return h }
