package edit

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/wtrace/wtrace/formats"
)

// Seeked is a session sliced for a replay that starts at a point of it
// (Seek). Its File reads a temporary file that no directory names; Close
// releases it.
type Seeked struct {
	*formats.File
	Result SliceResult
	tmp    *os.File
	name   string // still to remove at Close (when the system could not unlink an open file)
}

// Close closes the File and releases the temporary file.
func (s *Seeked) Close() error {
	err := s.File.Close()
	if cerr := s.tmp.Close(); err == nil {
		err = cerr
	}
	if s.name != "" {
		os.Remove(s.name)
	}
	return err
}

// seekWriter writes the temporary slice of Seek, unless its
// opts.Output.Writer says otherwise: a replay reads it back whole at once,
// and large blocks compress better and read faster (those of a capture
// file's recording, at the fastest level). On the 1.3 GiB session of
// docs/BENCHMARKS.md, from 3h44m: 757 MB of slice and 14.4–15.6 s to a
// replay's start, against 1,007 MB and 18.4 s in the Writer's default
// 256 KiB blocks.
var seekWriter = formats.WriterOptions{BlockSize: 4 << 20, BlockInterval: -1, DictSize: -1}

// Seek slices session in as Slice does with opts (of Output, only the
// Writer options are used; zero means 4 MiB blocks at the fastest level)
// and opens the slice, for a replay that starts at opts.From and ends at
// opts.To: the records `wtrace slice` writes, without a file left behind.
// The slice goes to a temporary file in dir (os.TempDir() if empty) that
// is unlinked at once where the system allows it (the space it takes is
// released at Close, or when the process ends): memory stays what
// Slice's is, however long the session.
func Seek(ctx context.Context, in, dir string, opts SliceOptions) (*Seeked, error) {
	f, err := formats.Open(in, formats.ReaderOptions{})
	if err != nil {
		return nil, fmt.Errorf("edit: %w", err) // a *formats.OpenError: it names in
	}
	defer f.Close()
	return SeekFile(ctx, f, in, dir, opts)
}

// SeekFile is Seek of the open session f, named in: a caller that opened
// the file already does not open it again. The caller keeps f (the
// Seeked holds the slice, not f).
func SeekFile(ctx context.Context, in *formats.File, name, dir string, opts SliceOptions) (*Seeked, error) {
	tmp, err := os.CreateTemp(dir, "wtrace-seek-*.wt")
	if err != nil {
		return nil, fmt.Errorf("edit: seek: %w", err)
	}
	sk := &Seeked{tmp: tmp}
	if os.Remove(tmp.Name()) != nil {
		sk.name = tmp.Name()
	}
	fail := func(err error) (*Seeked, error) {
		tmp.Close()
		if sk.name != "" {
			os.Remove(sk.name)
		}
		return nil, err
	}
	w := opts.Output.Writer
	if w == (formats.WriterOptions{}) {
		w = seekWriter
	}
	opts.Output = formats.FileSinkOptions{Out: tmp, Writer: w}
	res, err := SliceFile(ctx, in, name, opts)
	if err != nil {
		return fail(err)
	}
	sk.Result = res
	size, err := tmp.Seek(0, 2)
	if err != nil {
		return fail(fmt.Errorf("edit: seek: %w", err))
	}
	f, err := formats.OpenReaderAt(tmp, size, formats.ReaderOptions{})
	if err != nil {
		return fail(fmt.Errorf("edit: seek: reading the slice back: %w", err))
	}
	if !f.Clean() {
		f.Close()
		return fail(errors.Join(append([]error{errors.New("edit: seek: the slice reads back damaged")}, f.Problems()...)...))
	}
	sk.File = f
	return sk, nil
}
