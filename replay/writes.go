package replay

import (
	"fmt"

	"github.com/wtrace/wtrace/replay/internal/fromworld"
)

// Writes says how a replay answers the requests that change the world
// (POST, PUT, PATCH, DELETE) and what its watchers see of them.
type Writes string

const (
	// WritesAnswer (the default) makes the replay an apiserver whose world
	// is the recording's environment: reads answered from the world when
	// they arrive, writes as kube-apiserver would, the environment's
	// changes applied at their pace (see the package doc).
	WritesAnswer Writes = "answer"
	// WritesApply is WritesAnswer (the name of an earlier mode, kept).
	WritesApply Writes = "apply"
	// WritesReject serves the recording as a tape, each client on its
	// own recorded timeline, and answers every write with 403 Forbidden:
	// a read-only replay.
	WritesReject Writes = "reject"
	// WritesRecorded serves only what was recorded: a write gets a
	// recorded exchange of the same method and path, or 404.
	WritesRecorded Writes = "recorded"
)

// ParseWrites reads a Writes mode by name ("" is WritesAnswer).
func ParseWrites(s string) (Writes, error) {
	switch w := Writes(s); w {
	case "":
		return WritesAnswer, nil
	case WritesAnswer, WritesApply, WritesReject, WritesRecorded:
		return w, nil
	}
	return "", fmt.Errorf("replay: writes mode %q: want answer, apply, reject or recorded", s)
}

// AnswersWrites reports whether mode w (a name ParseWrites reads) makes a
// replay whose world is the recording's environment: answer (or "") and
// apply.
func (w Writes) AnswersWrites() bool {
	m, err := ParseWrites(string(w))
	return err == nil && (m == WritesAnswer || m == WritesApply)
}

// Pace says when a replay that answers writes applies the environment's
// next change: PaceRecorded or PaceQuiet (see fromworld.Pace).
type Pace = fromworld.Pace

const (
	// PaceRecorded (the default) applies each change at its recorded
	// time, scaled by Options.Speed (see the package doc).
	PaceRecorded = fromworld.PaceRecorded
	// PaceQuiet applies the next change once the clients have been quiet
	// for Options.QuietWindow.
	PaceQuiet = fromworld.PaceQuiet
)

// DefaultQuietWindow is the QuietWindow a zero Options means.
const DefaultQuietWindow = fromworld.DefaultQuietWindow

// DefaultQuietMaxWait bounds how long, with PaceQuiet, the next change
// waits for the run to make the writes the recording shows before it,
// once the recorded gap is longer.
const DefaultQuietMaxWait = fromworld.DefaultQuietMaxWait

// PairWait bounds how long a change to an object the recorded clients
// created waits for the run's clients to create their counterpart before
// it is applied (or dropped).
const PairWait = fromworld.PairWait

// DeliveryWait bounds how long a write's answer waits for its watch
// events to have gone out to every watcher of the world.
const DeliveryWait = fromworld.DeliveryWait

// ParsePace reads a Pace by name ("" is PaceRecorded).
func ParsePace(s string) (Pace, error) { return fromworld.ParsePace(s) }
