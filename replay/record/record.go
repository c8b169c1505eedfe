// Package record records a replay's run into a session file: every
// request the replay's clients made, with its body, and every answer they
// got, with the times of both (wtrace replay --out), and how the replay
// answered each (the note of the response's End: formats.ReplayAnswer).
// The file is a normal session (source "replay"): inspect, events, diff,
// report and replay read it.
//
//	rec, _ := record.New(record.Options{Output: formats.FileSinkOptions{Path: "run.wt"}})
//	srv, _ := replay.Open("session.wt", replay.Options{Out: rec})
//	… clients …
//	res, err := rec.Close() // closes srv first; closing srv before is the same
//
// A Recorder is the replay.Out of a Server: each exchange reaches it as
// the bytes of an HTTP/1.1 request and response, which a capture.Tee parses
// as the recording proxy's (HTTP, watch events, redaction: credentials in
// headers never reach the file, Secret values are replaced unless
// KeepSecrets) and a formats.FileSink writes (Meta, Summary, limits). It
// sits above both replay and capture, which share a layer: neither imports
// the other, and this package connects them.
package record

import (
	"sync"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/replay"
)

// Options configure a Recorder. Output's Path (or Out) is needed; the rest
// may stay zero: Secret values redacted, the wall clock.
type Options struct {
	// Output is where the session goes: Path or Out, the Writer's
	// options, MaxSize, MaxDuration, Rotate. New sets its Meta and Totals.
	Output formats.FileSinkOptions
	// Tool names the recorder in Meta ("wtrace v0.3.0"); "" means "wtrace".
	Tool string
	// Description says what was replayed ("replay of incident.wt"), for
	// Meta.
	Description string
	// Labels are added to Meta (the session replayed, …).
	Labels map[string]string
	// KeepSecrets stores Secret objects' values as the replay sent them.
	// Credentials in headers are never stored.
	KeepSecrets bool
	// Clock stamps the bytes; nil means time.Now. Give the replay's clock
	// (replay.Options.Clock's Now) when it is not the wall clock.
	Clock func() time.Time
	// FlushInterval is how often the file is flushed; 0 means
	// capture.DefaultFlushInterval.
	FlushInterval time.Duration
}

// Recorder writes a replay's traffic to a session file. It is a
// replay.Out, safe for concurrent use; Close ends the file (and closes
// the Servers recording into it first).
type Recorder struct {
	tee *capture.TeeFiles

	mu      sync.Mutex
	servers []*replay.Server // bound by replay.New

	once sync.Once
	res  capture.Result
	err  error
}

var _ replay.ServerCloser = (*Recorder)(nil)

// New creates the session file (its Meta: source "replay") and starts
// recording into it. Errors of the file are *formats.OutputError.
func New(opts Options) (*Recorder, error) {
	tool := opts.Tool
	if tool == "" {
		tool = "wtrace"
	}
	out := opts.Output
	out.Meta = formats.NewMeta(tool, formats.SourceReplay, opts.Description, opts.KeepSecrets)
	out.Meta.Labels = opts.Labels
	tf, err := capture.NewTeeFiles(out, capture.TeeOptions{KeepSecrets: opts.KeepSecrets, Clock: opts.Clock, FlushInterval: opts.FlushInterval})
	if err != nil {
		return nil, err
	}
	return &Recorder{tee: tf}, nil
}

// Conn starts the record of one exchange (see replay.Out).
func (r *Recorder) Conn(client, server string) replay.OutConn {
	return r.tee.Conn(client, server, "http/1.1")
}

// Err returns the error that stopped the recording (writing the file
// failed), or nil; the replay goes on unrecorded after it.
func (r *Recorder) Err() error { return r.tee.Err() }

// BindServer is called by replay.New for a Server recording into r (see
// replay.ServerCloser): Close closes it first.
func (r *Recorder) BindServer(s *replay.Server) {
	r.mu.Lock()
	r.servers = append(r.servers, s)
	r.mu.Unlock()
}

// Close closes the replay.Servers recording into r (Server.Close: every
// answer ends as the Server ends it, which the recording keeps; a Server
// closed already is left as it is), then records what is still queued,
// ends what is still open (as cut by the end of the recording), writes
// the Summary and closes the file: whichever of a Server and its Recorder
// is closed first, the run is the same. The Summary's note says what the
// one Server recording into r did with the recording's environment
// (EnvironmentReport.String), if it answered writes, then lists the
// perturbations of a perturbed run (perturb.Applied, a line each). It returns what was
// recorded: Files, Size, and the Tee's Stats. Later calls return the same.
func (r *Recorder) Close() (capture.Result, error) { return r.CloseNote("") }

// CloseNote is Close with a note for the Summary (what the replay did with
// the recording's environment, say).
func (r *Recorder) CloseNote(note string) (capture.Result, error) {
	r.once.Do(func() {
		r.mu.Lock()
		servers := r.servers
		r.servers = nil
		r.mu.Unlock()
		for _, s := range servers {
			s.Close()
			if env := s.Environment(); env != nil && note == "" && len(servers) == 1 {
				note = env.String()
			}
		}
		for _, s := range servers {
			// A perturbed run's perturbations, a line each
			// (perturb.ParseApplied reads them back).
			for _, a := range s.Perturbations() {
				if note != "" {
					note += "\n"
				}
				note += a.String()
			}
		}
		r.res, r.err = r.tee.Close(note)
	})
	return r.res, r.err
}
