package tlsdec

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

// KeyLogFile is a key log file that clients may still be writing
// (SSLKEYLOGFILE of running processes, read during a live capture): Open
// reads what it holds, and each Refresh reads what was appended since,
// into the same KeyLog. Only whole lines are read: a line the client is
// still writing waits for its newline (at most MaxKeyLogLine bytes are
// kept for it). A file that shrank (truncated, or replaced by a new one)
// is read again from its start; secrets already read stay.
//
// A KeyLogFile is safe for concurrent use.
type KeyLogFile struct {
	path string
	keys *KeyLog

	mu      sync.Mutex
	off     int64  // bytes of the file read
	partial []byte // the start of a line whose newline has not come
	buf     []byte
}

// OpenKeyLogFile reads the key log at path and returns it, to be
// refreshed. The file must exist (a client creates it at its first
// handshake: create it empty first when recording starts before them).
func OpenKeyLogFile(path string) (*KeyLogFile, error) {
	f := &KeyLogFile{path: path, keys: &KeyLog{}}
	if err := f.Refresh(); err != nil {
		return nil, err
	}
	return f, nil
}

// KeyLog returns the secrets read so far; it grows with each Refresh.
func (f *KeyLogFile) KeyLog() *KeyLog { return f.keys }

// Path returns the file's path.
func (f *KeyLogFile) Path() string { return f.path }

// Refresh reads the lines appended to the file since the last read. It
// returns an error when the file cannot be opened or read; the KeyLog
// keeps what it had.
func (f *KeyLogFile) Refresh() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("tlsdec: key log: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("tlsdec: key log: %w", err)
	}
	if st.Size() < f.off {
		f.off, f.partial = 0, f.partial[:0]
	}
	if st.Size() == f.off {
		return nil
	}
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return fmt.Errorf("tlsdec: key log: %w", err)
	}
	if f.buf == nil {
		f.buf = make([]byte, 32<<10)
	}
	for {
		n, err := fh.Read(f.buf)
		if n > 0 {
			f.off += int64(n)
			f.take(f.buf[:n])
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tlsdec: key log: %w", err)
		}
	}
}

// take loads the whole lines of p (after what was left of the last read)
// and keeps the rest for the next read.
func (f *KeyLogFile) take(p []byte) {
	i := bytes.LastIndexByte(p, '\n')
	if i < 0 {
		f.partial = append(f.partial, p...)
		if len(f.partial) > MaxKeyLogLine {
			// No newline in sight: Load counts it as an overlong line.
			f.keys.Load(bytes.NewReader(f.partial))
			f.partial = f.partial[:0]
		}
		return
	}
	if len(f.partial) > 0 {
		f.partial = append(f.partial, p[:i+1]...)
		f.keys.Load(bytes.NewReader(f.partial))
		f.partial = f.partial[:0]
	} else {
		f.keys.Load(bytes.NewReader(p[:i+1]))
	}
	f.partial = append(f.partial, p[i+1:]...)
}
