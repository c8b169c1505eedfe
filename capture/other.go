package capture

import "github.com/wtrace/wtrace/formats"

// newOtherProto returns the handler for protocols other than plaintext
// HTTP/1.1, or nil (after recording why) when wtrace cannot parse them.
func (r *Recorder) newOtherProto(st *tcpStream, kind string, t int64) protoHandler {
	switch kind {
	case "h2c":
		return newH2Conn(r.s, st.id)
	case "tls":
		return newTLSConn(r.s, st.id, r.opts.KeyLog)
	case "tls-midstream":
		r.s.stats.TLSConns++
		r.s.stats.TLSUndecrypted++
		r.s.anomaly(st.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyNoKeys, 0, 0,
			"TLS connection that began before the capture: without its handshake it cannot be decrypted")
	default:
		r.s.anomaly(st.id, formats.NoExchange, formats.ServerToClient, t, formats.AnomalyUnknown, 0, 0,
			kind+" is not supported yet")
	}
	return nil
}
