package sidecar

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
)

// replayStore keeps on disk the files of the models a Supervisor
// registered, so that it can replay them after a restart without holding
// them in memory. Each registration gets its own directory under the
// supervisor's private one (0700); each file is put there under a number
// (model file names are never used as paths), never changed after. A file
// whose SHA-256 the caller knows (the watcher's download, hashed as it was
// written and verified against the model config's checksum) is hard-linked
// into place: nothing is read, written or hashed (copied in the kernel
// where no link can be made). Any other file is copied through a temporary
// file (0600), hashed on the way, then renamed into place; files registered
// as bytes are also read back and checked. The sidecar takes the stored
// files by path (FileHeader.local_path: it links them in turn), at the
// registration and at each replay; a replay first reads each file back and
// checks its size and SHA-256 (verify), since it has sat on disk since.
type replayStore struct {
	dir string
	seq atomic.Uint64
}

// storedModel is one registration's files on disk.
type storedModel struct {
	dir   string
	files []storedFile // sorted by name, as registrations send them
}

type storedFile struct {
	name string // the model's file name
	blob string // where it is on disk
	size int64
	sum  [sha256.Size]byte
	// linked: blob is a hard link to the file registered (or a copy
	// made in the kernel), whose SHA-256 the caller gave.
	linked bool
}

func newReplayStore(dir string) (*replayStore, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sidecar supervisor: replay store: %w", err)
	}
	return &replayStore{dir: dir}, nil
}

// put writes a registration's files; on any failure it leaves nothing.
func (st *replayStore) put(modelPath string, files runtimes.Files) (*storedModel, error) {
	return st.store(modelPath, slices.Sorted(maps.Keys(files)), func(dir, blob, name string) (storedFile, error) {
		return writeVerified(dir, blob, files[name])
	})
}

// store makes a model's directory in the store and puts each of names in
// it with putOne (as blob "0", "1", ... in that order), then seals them;
// on any failure it leaves nothing.
func (st *replayStore) store(modelPath string, names []string, putOne func(dir, blob, name string) (storedFile, error)) (*storedModel, error) {
	dir := filepath.Join(st.dir, strconv.FormatUint(st.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("replay store: model %q: %w", modelPath, err)
	}
	m := &storedModel{dir: dir}
	for i, name := range names {
		f, err := putOne(dir, strconv.Itoa(i), name)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("replay store: model %q: file %q: %w", modelPath, name, err)
		}
		f.name = name
		m.files = append(m.files, f)
	}
	if err := m.seal(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("replay store: model %q: %w", modelPath, err)
	}
	return m, nil
}

// seal makes the model's stored files read-only (0400), the statement
// that nothing writes them again: the sidecar links them into its own
// directory (--local_files_dir) and the TensorFlow runtime maps a
// read-only file where it is rather than copying it (its guard against a
// file written in place through another link). A linked download's inode
// is the same, and the watcher only removes its name for it.
func (m *storedModel) seal() error {
	for _, f := range m.files {
		if err := os.Chmod(f.blob, 0o400); err != nil {
			return err
		}
	}
	return nil
}

// putFiles puts a registration's files from local disk into the store:
// a file whose SHA-256 sums has (the caller computed and verified it, and
// gives the file up: it is never written again) is hard-linked, or copied
// in the kernel across filesystems (linkOrCopy); any other is copied in
// chunks (no file is held in memory), hashed on the way (copyVerified). On
// any failure it leaves nothing.
func (st *replayStore) putFiles(modelPath string, files runtimes.DiskFiles, sums map[string][sha256.Size]byte) (*storedModel, error) {
	return st.store(modelPath, slices.Sorted(maps.Keys(files)), func(dir, blob, name string) (storedFile, error) {
		if sum, ok := sums[name]; ok {
			return linkOrCopy(dir, blob, files[name], sum)
		}
		return copyVerified(dir, blob, files[name])
	})
}

// linkOrCopy puts the file at src, whose SHA-256 is sum, at dir/name: a
// hard link (the same inode: no byte read or written), or, where src is on
// another filesystem (or links are refused), a copy made through a
// temporary file by io.Copy between two *os.File, which the kernel does
// (copy_file_range or sendfile) without the bytes entering this process.
func linkOrCopy(dir, name, src string, sum [sha256.Size]byte) (storedFile, error) {
	sf := storedFile{blob: filepath.Join(dir, name), sum: sum, linked: true}
	in, err := os.Open(src)
	if err != nil {
		return sf, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return sf, err
	}
	if !fi.Mode().IsRegular() {
		return sf, fmt.Errorf("%s is not a regular file", src)
	}
	sf.size = fi.Size()
	if linkOpened(in, sf.blob) == nil { // the file opened and measured
		return sf, nil
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*") // mode 0600
	if err != nil {
		return sf, err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	n, werr := io.Copy(tmp, in)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return sf, err
	}
	if n != sf.size {
		return sf, fmt.Errorf("copied %d bytes of %s, which has %d", n, src, sf.size)
	}
	return sf, os.Rename(tmp.Name(), sf.blob)
}

// copyVerified copies the file at src to dir/name through a temporary
// file, recording the size and SHA-256 of what it read from src. It does
// not read the copy back: the file is the operator's (a local model), not
// one this process wrote and hashed, so its one read is the hash.
func copyVerified(dir, name, src string) (storedFile, error) {
	sf := storedFile{blob: filepath.Join(dir, name)}
	in, err := os.Open(src)
	if err != nil {
		return sf, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".tmp-*") // mode 0600
	if err != nil {
		return sf, err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	h := sha256.New()
	n, werr := io.CopyBuffer(tmp, io.TeeReader(in, h), make([]byte, streamChunkBytes))
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return sf, err
	}
	sf.size = n
	h.Sum(sf.sum[:0])
	return sf, os.Rename(tmp.Name(), sf.blob)
}

// writeVerified writes data to dir/name through a temporary file that it
// reads back and checks before the rename.
func writeVerified(dir, name string, data []byte) (storedFile, error) {
	sf := storedFile{blob: filepath.Join(dir, name), size: int64(len(data)), sum: sha256.Sum256(data)}
	tmp, err := os.CreateTemp(dir, ".tmp-*") // mode 0600
	if err != nil {
		return sf, err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return sf, err
	}
	back, err := os.Open(tmp.Name())
	if err != nil {
		return sf, err
	}
	h := sha256.New()
	n, err := io.Copy(h, back)
	back.Close()
	if err != nil {
		return sf, fmt.Errorf("read back: %w", err)
	}
	if n != sf.size || !bytes.Equal(h.Sum(nil), sf.sum[:]) {
		return sf, fmt.Errorf("the copy written to %s (%d bytes) differs from what was registered (%d bytes)", tmp.Name(), n, sf.size)
	}
	return sf, os.Rename(tmp.Name(), sf.blob)
}

// remove deletes a registration's files (nil: nothing).
func (st *replayStore) remove(m *storedModel) {
	if m != nil {
		os.RemoveAll(m.dir)
	}
}

// headers are the registration's file headers for the sidecar: each file
// by its path in the store (relative to the store's directory, the
// sidecar's --local_files_dir) with its SHA-256.
func (m *storedModel) headers(storeDir string) ([]*inferencepb.FileHeader, error) {
	hs := make([]*inferencepb.FileHeader, len(m.files))
	for i, f := range m.files {
		rel, err := filepath.Rel(storeDir, f.blob)
		if err != nil {
			return nil, fmt.Errorf("stored file %q: %w", f.name, err)
		}
		hs[i] = &inferencepb.FileHeader{Path: f.name, Size: f.size, LocalPath: filepath.ToSlash(rel), Sha256: f.sum[:]}
	}
	return hs, nil
}

// bytes is the registration's total file size.
func (m *storedModel) bytes() int64 {
	var n int64
	for _, f := range m.files {
		n += f.size
	}
	return n
}

// verify reads every file back and fails if one is not what was
// registered: another size or another SHA-256. A replay calls it before it
// hands the files to the new sidecar: they have sat on disk since the
// registration, where a temp cleaner, a full disk or a hand could have
// changed them, and a replay must bring back what served or nothing.
func (m *storedModel) verify() error {
	for _, sf := range m.files {
		if err := verifyFile(sf); err != nil {
			return err
		}
	}
	return nil
}

func verifyFile(sf storedFile) error {
	f, err := os.Open(sf.blob)
	if err != nil {
		return fmt.Errorf("stored file %q: %w", sf.name, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("stored file %q (%s): %w", sf.name, sf.blob, err)
	}
	if n != sf.size {
		return fmt.Errorf("stored file %q (%s) has %d bytes, registered %d: the file changed on disk after registration", sf.name, sf.blob, n, sf.size)
	}
	return checkSum(sf, h)
}

func checkSum(sf storedFile, h hash.Hash) error {
	if got := h.Sum(nil); !bytes.Equal(got, sf.sum[:]) {
		return fmt.Errorf("stored file %q (%s): SHA-256 %x, registered %x: the file changed on disk after registration", sf.name, sf.blob, got, sf.sum)
	}
	return nil
}
