//go:build !linux

package replay

import (
	"errors"
	"syscall"
)

// schedSupported: streams do not park on this platform; each keeps its
// goroutine (see scheduler).
const schedSupported = false

type rawWriter struct{}

func (w *rawWriter) init() {}

func (w *rawWriter) writev(rc syscall.RawConn, bufs [][]byte) (int64, error) {
	return 0, errors.New("replay: no scheduler on this platform")
}

func (oc *ownConn) peer(w *rawWriter) bool { return false }
