//go:build linux

package pace

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// Supported: streams may park in a Scheduler on this platform.
const Supported = true

// maxIov is the most iovecs one writev takes (IOV_MAX on Linux).
const maxIov = 1024

// writer writes through a syscall.RawConn without blocking: one writev
// (more if the batch holds more than maxIov buffers) until all is written
// or the socket's buffer is full. It belongs to the scheduler's goroutine;
// its function values are made once, so that a write does not allocate.
type writer struct {
	iov     []syscall.Iovec
	n       int64
	errno   syscall.Errno
	writeFn func(fd uintptr) bool
	peekFn  func(fd uintptr) bool
	peekBuf [64]byte
	peekN   int
}

func (w *writer) init() {
	w.writeFn = w.doWritev
	w.peekFn = w.doPeek
}

// writev writes bufs to rc without blocking and returns how many bytes
// went out (fewer than all when the socket's buffer is full).
func (w *writer) writev(rc syscall.RawConn, bufs [][]byte) (int64, error) {
	w.iov = w.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			w.iov = append(w.iov, v)
		}
	}
	w.n, w.errno = 0, 0
	err := rc.Write(w.writeFn)
	clear(w.iov[:cap(w.iov)]) // keep no buffer alive
	if err == nil && w.errno != 0 {
		err = os.NewSyscallError("writev", w.errno)
	}
	return w.n, err
}

func (w *writer) doWritev(fd uintptr) bool {
	iov := w.iov
	for len(iov) > 0 {
		k := min(len(iov), maxIov)
		r, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return true
		default:
			w.errno = e
			return true
		}
		w.n += int64(r)
		for r > 0 && len(iov) > 0 {
			if l := uintptr(iov[0].Len); r < l {
				iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), r))
				iov[0].SetLen(int(l - r))
				break
			}
			r -= uintptr(iov[0].Len)
			iov = iov[1:]
		}
	}
	return true
}

// peer reports whether the client of a parked stream's connection rc may
// still be there: false once it closed its side or the connection failed.
// What the client sent meanwhile is read and dropped (as replay's ownWait
// does).
func (w *writer) peer(rc syscall.RawConn) bool {
	for range 16 {
		w.peekN, w.errno = 0, 0
		if err := rc.Read(w.peekFn); err != nil {
			return !errors.Is(err, syscall.EBADF) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded)
		}
		switch {
		case w.errno == syscall.EAGAIN:
			return true
		case w.errno != 0, w.peekN == 0:
			return false
		}
	}
	return true // a client that keeps sending: left for the next sweep
}

// doPeek reads what is waiting on the socket without blocking (the
// descriptor is non-blocking, as every one of the netpoller's): 0 bytes
// is the client's FIN.
func (w *writer) doPeek(fd uintptr) bool {
	for {
		n, err := syscall.Read(int(fd), w.peekBuf[:])
		if err == syscall.EINTR {
			continue
		}
		w.peekN, w.errno = max(n, 0), 0
		if e, ok := err.(syscall.Errno); ok {
			w.errno = e
		}
		return true
	}
}
