package replay

import "github.com/wtrace/wtrace/replay/internal/tape"

// Loss is what a damaged session file lost of one recorded exchange (see
// package replay/internal/tape, which finds them).
type Loss = tape.Loss

// Losses returns what the session's damage lost of the exchanges the
// server answers from, found by New, by exchange and then body offset.
// Empty for a sound file. The caller must not modify it.
func (s *Server) Losses() []*Loss { return s.losses }

// cross notes that the stream goes past loss l, with a warning the first
// time.
func (st *streamer) cross(l *tape.Loss) {
	for _, c := range st.crossed {
		if c == l {
			return
		}
	}
	st.crossed = append(st.crossed, l)
	st.s.log.Warn("replay: stream crosses data lost to session damage; it will end cut", "loss", l.String())
}

// cut ends a stream that crossed data lost to damage, when it would have
// ended cleanly: without its terminating chunk (HTTP/1.1: the connection
// is closed) or with RST_STREAM (HTTP/2), as a stream the network cut, so
// that no client takes what it got for the complete recording.
func (st *streamer) cut() {
	st.s.log.Warn("replay: stream cut: it crossed data lost to session damage",
		"method", st.method, "target", truncate(st.target), "losses", len(st.crossed))
	st.abort(false)
}
