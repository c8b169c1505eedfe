// Package outfile writes the files wtrace produces so that an output never
// destroys an input, nor what its path held before:
//
//   - Check refuses an output that is one of the inputs by file identity
//     (os.SameFile): the same path written another way (./x, ../dir/x), a
//     symbolic link to it, a hard link to it. Commands call it for every
//     output before anything is opened for writing.
//   - Create writes to a temporary file in the output's directory, renamed
//     over the output only once it is complete (Commit), so that a failure
//     or a kill leaves whatever the path held before untouched. A file that
//     must be found at its name while it is being written (a live
//     recording, readable up to its last block if the recorder dies) is
//     renamed into place early with Publish.
//
// Standard library only (layer 0).
package outfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrInput is what an *InputError wraps: the output is one of the inputs.
var ErrInput = errors.New("the output is one of the inputs")

// InputError says that the output Out is the same file as the input In.
type InputError struct {
	Out, In string
}

func (e *InputError) Error() string {
	if e.Out == e.In {
		return fmt.Sprintf("%s is both an input and the output: writing it would destroy what is being read", e.Out)
	}
	return fmt.Sprintf("%s is the same file as the input %s: writing it would destroy what is being read", e.Out, e.In)
}

func (e *InputError) Unwrap() error { return ErrInput }

// Stdio reports whether path names standard input or output ("-"), or
// nothing (""): no file of its own.
func Stdio(path string) bool { return path == "" || path == "-" }

// Check returns an *InputError if out is the same file as one of ins:
// the same path once cleaned and made absolute, or, when both exist, the
// same file (os.SameFile of what os.Stat finds: symbolic links are
// followed, hard links are the same file). Paths that are not files
// (Stdio) are skipped; an input that cannot be stat'ed is compared by path
// only (its own reading fails).
func Check(out string, ins ...string) error {
	if Stdio(out) {
		return nil
	}
	oa, _ := filepath.Abs(out)
	oi, oerr := os.Stat(out)
	for _, in := range ins {
		if Stdio(in) {
			continue
		}
		if ia, _ := filepath.Abs(in); ia == oa {
			return &InputError{Out: out, In: in}
		}
		if oerr != nil {
			continue // nothing there to destroy
		}
		if ii, err := os.Stat(in); err == nil && os.SameFile(oi, ii) {
			return &InputError{Out: out, In: in}
		}
	}
	return nil
}

// File is an output being written: a temporary file in the directory of
// its path, renamed to the path by Publish or Commit. Its *os.File methods
// write the temporary file. Not safe for concurrent use.
type File struct {
	*os.File
	path      string
	published bool
	done      bool
}

// tempName returns a fresh temporary name beside path:
// "dir/.base.tmp-0123456789ab".
func tempName(path string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(b[:])), nil
}

// Create creates the temporary file of an output at path (in path's
// directory, so that the rename cannot cross file systems), with the
// permissions os.Create gives (0666 before the umask). Nothing at path
// changes until Publish or Commit.
func Create(path string) (*File, error) {
	for range 8 {
		name, err := tempName(path)
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			// Say what the user named, not the temporary name.
			var pe *os.PathError
			if errors.As(err, &pe) {
				pe.Path = path
			}
			return nil, err
		}
		out := &File{File: f, path: path}
		track(out, true)
		return out, nil
	}
	return nil, fmt.Errorf("outfile: no free temporary name beside %s", path)
}

// Path returns the path the file is written for.
func (f *File) Path() string { return f.path }

// Publish syncs what was written so far and renames the file to its path
// now, while it is still open for writing: from then on the path holds it,
// also if the process dies. Commit then only syncs and closes it, and
// Abort leaves it in place. A second call does nothing.
func (f *File) Publish() error {
	if f.published || f.done {
		return nil
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	if err := os.Rename(f.File.Name(), f.path); err != nil {
		return err
	}
	f.published = true
	track(f, false)
	syncDir(f.path)
	return nil
}

// Commit syncs and closes the file and renames it to its path (if Publish
// did not). On error the temporary file is removed and the path keeps what
// it held. A second call returns nil.
func (f *File) Commit() error {
	if f.done {
		return nil
	}
	f.done = true
	track(f, false)
	err := f.File.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil && !f.published {
		err = os.Rename(f.File.Name(), f.path)
		if err == nil {
			syncDir(f.path)
		}
	}
	if err != nil && !f.published {
		os.Remove(f.File.Name())
	}
	return err
}

// Abort closes the file and removes it, leaving what the path held before
// — unless the file was published: then it stays at its path, as written
// so far. After Commit it does nothing. A second call does nothing.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	track(f, false)
	f.File.Close()
	if !f.published {
		os.Remove(f.File.Name())
	}
}

// pending are the Files created and neither published, committed nor
// aborted, for RemovePending.
var (
	pendingMu sync.Mutex
	pending   = map[*File]bool{}
)

func track(f *File, on bool) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	if on {
		pending[f] = true
	} else {
		delete(pending, f)
	}
}

// RemovePending removes the temporary file of every output still being
// written (neither published, committed nor aborted), leaving what their
// paths held: for a process about to exit without finishing them (a
// second Ctrl-C). Their writers may still be running; what they write
// goes nowhere.
func RemovePending() {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	for f := range pending {
		os.Remove(f.File.Name())
		delete(pending, f)
	}
}

// syncDir makes a rename in path's directory durable, where the system
// allows it (best effort: not every system opens directories).
func syncDir(path string) {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}

// WriteFile writes data to path with permissions perm, as Create and
// Commit do: whole, or not at all.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Abort()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
