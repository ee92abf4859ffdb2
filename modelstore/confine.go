package modelstore

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
)

// fileRoot confines reads from a file:// bucket to its directory.
// gocloud.dev's fileblob opens keys with os.Open, which follows symlinks
// wherever they point, so a model or config that is a symlink (or sits
// under a symlinked directory) could read any file the server can. Every
// read is checked after fileblob has opened the file and before a byte is
// read: the key must resolve, through os.Root (which refuses to leave its
// directory), to the very file fileblob opened. Relative symlinks that
// stay inside the root pass; absolute ones are refused (os.Root does not
// resolve them), even when they point inside. Checking the opened file itself, not the path beforehand,
// leaves no window for a symlink swapped in between.
type fileRoot struct {
	// dir is the bucket directory, absolute but with symlinks unresolved,
	// as fileblob computes it, so file names fileblob opens start with it.
	dir string
}

// newFileRoot returns the root of a file:// bucket URL, derived the way
// fileblob derives its directory.
func newFileRoot(u *url.URL) (*fileRoot, error) {
	p := u.Path
	if u.Host == "." || os.PathSeparator != '/' {
		p = strings.TrimPrefix(p, "/")
	}
	dir, err := filepath.Abs(filepath.FromSlash(p))
	if err != nil {
		return nil, err
	}
	return &fileRoot{dir: dir}, nil
}

// readerOptions returns the options that make a bucket reader check the
// file it opened; nil when the bucket is not a file:// bucket.
func (r *fileRoot) readerOptions() *blob.ReaderOptions {
	if r == nil {
		return nil
	}
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		var f *os.File
		if !as(&f) {
			return failf(reasonOutsideRoot, "cannot check that it stays inside the bucket root %s; refused", r.dir)
		}
		return r.check(f)
	}}
}

// check verifies that f, opened by fileblob, is the file its name
// designates inside the bucket root, symlinks resolved without leaving it.
// Its errors do not name the key: callers do.
func (r *fileRoot) check(f *os.File) error {
	opened, err := f.Stat()
	if err != nil {
		return failf(reasonLocalError, "stat the opened file: %w", err)
	}
	rel, err := filepath.Rel(r.dir, f.Name())
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return failf(reasonOutsideRoot, "opened %s, which is not under the bucket root %s; refused", f.Name(), r.dir)
	}
	// Opened per read, not once: a bucket directory that is itself a symlink
	// (a "current" link flipped at deploy) is followed as fileblob follows it.
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return failf(reasonLocalError, "open the bucket root %s: %w", r.dir, err)
	}
	defer root.Close()
	inside, err := root.Stat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return failf(reasonNotFound, "%w", err)
	}
	if err != nil {
		return failf(reasonOutsideRoot, "leaves the bucket root %s (a symlink resolves outside it, or is absolute: only relative symlinks that stay inside the root are followed); refused: %w", r.dir, err)
	}
	if !os.SameFile(opened, inside) {
		return failf(reasonOutsideRoot, "leaves the bucket root %s: the file opened is not the one the key names inside it (a symlink was replaced while it was opened); refused", r.dir)
	}
	return nil
}

// readErr wraps a failed bucket read (format names the object): a refusal
// by the confinement check keeps its reason and loses the blob package's
// prefix, which would repeat the key.
func readErr(err error, format string, args ...any) error {
	if fe, ok := errors.AsType[*fetchError](err); ok {
		return failf(fe.reason, format+": %w", append(args, fe.err)...)
	}
	return failf(bucketReason(err), format+": %w", append(args, err)...)
}
