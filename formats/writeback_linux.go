package formats

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f at off to
// disk without waiting for it (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE). It is a hint: it promises nothing about
// durability (only fsync does), and its errors are ignored.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
