package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// What `replay` and `record --proxy` share as services: the log format,
// and how a signal stops them.

// logFormats are the values of --log-format.
var logFormats = []string{"text", "json"}

// checkLogFormat validates --log-format.
func checkLogFormat(v string) error {
	for _, f := range logFormats {
		if v == f {
			return nil
		}
	}
	return &usageError{fmt.Errorf("--log-format %q: want text or json", v)}
}

// newLogger is the logger of a service on stderr: the short lines of
// lineHandler ("12:03:04.512 GET /api/v1/… how=recorded status=200"), or
// one JSON object a line (log/slog's JSONHandler: time, level, msg and
// the attributes) for a log collector.
func newLogger(s streams, format string, level slog.Level) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(s.err, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(&lineHandler{w: s.err, level: level, mu: &sync.Mutex{}})
}

// serviceSignals returns a context that the first SIGINT or SIGTERM
// cancels, after calling first (which says what stopping means); a second
// signal calls again and exits at once with status 1. release stops
// listening when no signal came.
//
// It is the one place the service commands handle signals, so that it can
// be swapped for the CLI's shared signal helper (first signal cancels a
// context, the second aborts) without touching them.
func serviceSignals(first, again func()) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
		case <-done:
			return
		}
		first()
		cancel()
		select {
		case <-sig:
		case <-done:
			return
		}
		again()
		os.Exit(1)
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
			cancel()
		})
	}
}
