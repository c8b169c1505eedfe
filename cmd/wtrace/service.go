package main

import (
	"fmt"
	"log/slog"

	"github.com/wtrace/wtrace/internal/logline"
)

// What `replay` and `record --proxy` share as services: the log format.
// (How a signal stops them is interruptible's, common.go.)

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
// internal/logline ("12:03:04.512 GET /api/v1/… how=recorded status=200"), or
// one JSON object a line (log/slog's JSONHandler: time, level, msg and
// the attributes) for a log collector.
func newLogger(s streams, format string, level slog.Level) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(s.err, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(logline.New(s.err, logline.Options{Level: level, TrimPrefix: "replay: ", Silent: "request", Bare: []string{"method", "target"}}))
}
