package capture

import "github.com/wtrace/wtrace/formats"

// newOtherProto returns the handler for protocols other than plaintext
// HTTP/1.1, or nil (after recording why) when wtrace cannot parse them.
func (r *Recorder) newOtherProto(st *tcpStream, kind string, t int64) protoHandler {
	s := st.c.s
	switch kind {
	case "h2c":
		return newH2Conn(s, st.c.id)
	case "tls":
		return newTLSConn(s, st.c.id, r.opts.KeyLog)
	case "tls-midstream":
		s.tlsSeen(1, 1)
		s.anomaly(st.c.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyNoKeys, 0, 0,
			"TLS connection that began before the capture: without its handshake it cannot be decrypted")
	default:
		s.anomaly(st.c.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyUnknown, 0, 0,
			kind+" is not supported yet")
	}
	return nil
}
