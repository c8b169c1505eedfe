package replay

// ServerCloser is an Out that outlives the Servers recording into it: New
// hands it each Server (BindServer), and the Out closes them — ending
// every answer as Close ends it — before it ends its own recording, so
// that the order in which a Server and its Out are closed does not matter.
// record.Recorder is one.
type ServerCloser interface {
	Out
	BindServer(*Server)
}

// bindOut hands s to its Out, if the Out closes the Servers it records.
func bindOut(s *Server) {
	if b, ok := s.opts.Out.(ServerCloser); ok {
		b.BindServer(s)
	}
}
