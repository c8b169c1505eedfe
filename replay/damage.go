package replay

import "github.com/wtrace/wtrace/replay/internal/tape"

// Loss is what a damaged session file lost of one recorded exchange (see
// package replay/internal/tape, which finds them).
type Loss = tape.Loss

// Losses returns what the session's damage lost of the exchanges the
// server answers from, found by New, by exchange and then body offset.
// Empty for a sound file. The caller must not modify it.
func (s *Server) Losses() []*Loss { return s.losses }
