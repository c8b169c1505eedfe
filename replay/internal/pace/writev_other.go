//go:build !linux

package pace

import (
	"errors"
	"syscall"
)

// Supported: streams do not park on this platform; each keeps its
// goroutine (see Scheduler).
const Supported = false

type writer struct{}

func (w *writer) init() {}

func (w *writer) writev(rc syscall.RawConn, bufs [][]byte) (int64, error) {
	return 0, errors.New("replay: no scheduler on this platform")
}

func (w *writer) peer(rc syscall.RawConn) bool { return false }
