package logline

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
)

func TestHandler(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(New(&b, Options{TrimPrefix: "replay: ", Silent: "request", Bare: []string{"method", "target"}}))
	l.Info("replay: request", "method", "GET", "target", "/api/v1/pods", "how", "recorded", "status", 200)
	l.With("exchange", 3).Warn("replay: no recorded exchange matches", "method", "GET", "target", "/x")
	l.Debug("not shown")
	want := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} GET /api/v1/pods how=recorded status=200\n` +
		`\d\d:\d\d:\d\d\.\d{3} WARN no recorded exchange matches exchange=3 GET /x\n$`)
	if !want.Match(b.Bytes()) {
		t.Errorf("lines:\n%s", b.String())
	}
}
