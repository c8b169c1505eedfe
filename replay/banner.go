package replay

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/wtrace/wtrace/export"
)

// BannerOptions is what WriteBanner says beyond what the Server knows.
type BannerOptions struct {
	// Session is the session file's name as the user gave it.
	Session string
	// Out names where the run is recorded (wtrace replay --out), if it is.
	Out string
	// Kubeconfig names the kubeconfig written for the server, if one was.
	Kubeconfig string
}

// WriteBanner writes what a started Server serves, for a person: the
// session, its span and what damage lost of it, the timing and modes, the
// URL with a command to try it, and the world's environment.
func (s *Server) WriteBanner(w io.Writer, b BannerOptions) {
	ov := export.NewOverview(s.file.Index())
	speed := fmt.Sprintf("speed %g", s.speed)
	switch s.speed {
	case 0:
		speed = "as fast as clients read (--speed 0)"
	case 1:
		speed = "original timing"
	}
	losses := s.Losses()
	var lost int64
	unknown := false
	for _, l := range losses {
		lost += max(l.Events, 0)
		unknown = unknown || l.Events < 0
	}
	lostText := ""
	switch {
	case lost > 0 && unknown:
		lostText = fmt.Sprintf("; at least %d of them lost to damage", lost)
	case lost > 0:
		lostText = fmt.Sprintf("; %d of them lost to damage", lost)
	case unknown:
		lostText = "; some of them maybe lost to damage"
	}
	fmt.Fprintf(w, "Replaying %s (%d exchanges, %d watch events over %s%s) at %s\n",
		b.Session, ov.Exchanges, ov.Events, time.Duration(ov.Last-ov.First).Round(time.Millisecond), lostText, speed)
	if len(losses) > 0 {
		fmt.Fprintf(w, "Warning: %s is damaged; what it lost is not served, and streams that cross it end cut:\n", b.Session)
		for _, l := range losses {
			fmt.Fprintf(w, "  %v\n", l)
		}
	}
	var modes []string
	for _, m := range []struct {
		on   bool
		what string
	}{
		{s.opts.Loop, "looping watch streams"},
		{s.opts.Hold, "holding streams open"},
		{s.opts.EventChunks, "one chunk per event"},
		{s.writes == WritesApply, "writes answered and applied to watches"},
		{s.writes == WritesReject, "writes rejected (403)"},
		{s.writes == WritesRecorded, "recorded answers only"},
		{b.Out != "", "recording the run to " + b.Out},
	} {
		if m.on {
			modes = append(modes, m.what)
		}
	}
	if len(modes) > 0 {
		fmt.Fprintf(w, "Mode: %s\n", strings.Join(modes, ", "))
	}
	fmt.Fprintf(w, "Listening on %s\n", s.URL)
	curlFlags := "-N"
	if strings.HasPrefix(s.URL, "https:") {
		curlFlags = "-N -k"
	}
	switch {
	case ov.Watch != "":
		fmt.Fprintf(w, "Try: curl %s '%s%s'\n", curlFlags, s.URL, ov.Watch)
	case ov.List != "":
		fmt.Fprintf(w, "Try: curl %s '%s%s'\n", curlFlags, s.URL, ov.List)
	}
	if b.Kubeconfig != "" {
		fmt.Fprintf(w, "Kubeconfig written to %s: kubectl --kubeconfig %s get …\n", b.Kubeconfig, b.Kubeconfig)
		if ex := export.KubectlWatch(ov.Watch); ex != "" {
			fmt.Fprintf(w, "  e.g. kubectl --kubeconfig %s %s\n", b.Kubeconfig, ex)
		}
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
	if env := s.Environment(); env != nil {
		fmt.Fprintf(w, "World: the recording's environment, %d changes (clients under test: %s; %d of their writes are the expected output, not replayed)\n",
			env.Changes, env.Clients, env.Writes)
	}
}

// LogBanner is WriteBanner for a structured log: one Info record of what
// the Server serves, and one of its world's environment.
func (s *Server) LogBanner(log *slog.Logger, b BannerOptions) {
	idx := s.file.Index()
	var events int64
	for _, x := range idx.Exchanges {
		events += x.Frames
	}
	log.Info("replay: serving", "session", b.Session, "exchanges", len(idx.Exchanges), "events", events, "url", s.URL,
		"speed", s.speed, "writes", string(s.writes), "losses", len(s.Losses()))
	if env := s.Environment(); env != nil {
		log.Info("replay: world", "changes", env.Changes, "clients", env.Clients, "expected-writes", env.Writes)
	}
}
