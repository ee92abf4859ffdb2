package sidecar

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

// takeLocalFile makes dst (a new file) the file a registration names by
// local_path under localDir: a hard link to it, so that the model's bytes
// are neither read nor written, or a copy (copy_file_range, in the
// kernel) where a link cannot be made (another filesystem). The file is
// opened through an os.Root of localDir, so that no path (.., a symlink)
// reaches outside it, and it is the opened file that is linked (through
// /proc/self/fd), not whatever its path names by then. It must be a
// regular file of the declared size; it is not hashed: the sender, the
// sidecar supervisor that owns the file, computed its SHA-256 as it
// downloaded and verified it (docs/architecture.md, "Loading beside
// serving"). Errors are INPUT_PARSING for a path or file that does not
// qualify, untyped for a failed link or copy (the caller makes them GRPC).
func takeLocalFile(localDir string, fh *inferencepb.FileHeader, dst string) error {
	root, err := os.OpenRoot(localDir)
	if err != nil {
		return fmt.Errorf("local files directory: %w", err)
	}
	defer root.Close()
	// O_NONBLOCK: a FIFO (or a device) opens at once, to be refused
	// below, rather than waiting for a writer; a regular file ignores it.
	src, err := root.OpenFile(fh.GetLocalPath(), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return inferr.Errorf(inferr.InputParsing, "local_path %q: %w", fh.GetLocalPath(), err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return fmt.Errorf("local_path %q: %w", fh.GetLocalPath(), err)
	}
	if !st.Mode().IsRegular() {
		return inferr.Errorf(inferr.InputParsing, "local_path %q is not a regular file (%s)", fh.GetLocalPath(), st.Mode().Type())
	}
	if st.Size() != fh.GetSize() {
		return inferr.Errorf(inferr.InputParsing, "local_path %q has %d bytes, the header declares %d", fh.GetLocalPath(), st.Size(), fh.GetSize())
	}
	linkErr := linkOpened(src, dst)
	if linkErr == nil {
		return nil
	}
	if errors.Is(linkErr, unix.EEXIST) {
		return fmt.Errorf("link %s: %w", dst, linkErr)
	}
	return copyLocalFile(src, dst, fh.GetSize())
}

// linkOpened makes dst a new hard link to the opened file f (through
// /proc/self/fd), not to whatever f's path names by now (another file, a
// symlink: link(2) does not follow one).
func linkOpened(f *os.File, dst string) error {
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD, dst, unix.AT_SYMLINK_FOLLOW)
}

// copyLocalFile copies src into a new file dst: io.Copy between two
// *os.File uses copy_file_range (or sendfile), so the bytes stay in the
// kernel.
func copyLocalFile(src *os.File, dst string, size int64) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, src)
	if err := errors.Join(err, out.Close()); err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	if n != size {
		return fmt.Errorf("copy to %s: %d bytes, the file had %d", dst, n, size)
	}
	return nil
}
