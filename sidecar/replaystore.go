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
// supervisor's private one (0700); each file is written to a temporary
// file (0600) and renamed into place under a number (model file names are
// never used as paths). Files registered as bytes are read back and
// checked against the SHA-256 of what was registered before the rename;
// files registered from disk are checked by the stream to the sidecar that
// reads the stored copy right after. Replay reads the files back in chunks
// and checks size and checksum again.
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
}

func newReplayStore(dir string) (*replayStore, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sidecar supervisor: replay store: %w", err)
	}
	return &replayStore{dir: dir}, nil
}

// put writes a registration's files; on any failure it leaves nothing.
func (st *replayStore) put(modelPath string, files runtimes.Files) (*storedModel, error) {
	dir := filepath.Join(st.dir, strconv.FormatUint(st.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("replay store: model %q: %w", modelPath, err)
	}
	m := &storedModel{dir: dir}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	for i, name := range names {
		f, err := writeVerified(dir, strconv.Itoa(i), files[name])
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("replay store: model %q: file %q: %w", modelPath, name, err)
		}
		f.name = name
		m.files = append(m.files, f)
	}
	return m, nil
}

// putFiles copies a registration's files from local disk, in chunks (no
// file is held in memory), hashing them on the way (the stream that
// follows checks the copy); on any failure it leaves nothing.
func (st *replayStore) putFiles(modelPath string, files runtimes.DiskFiles) (*storedModel, error) {
	dir := filepath.Join(st.dir, strconv.FormatUint(st.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("replay store: model %q: %w", modelPath, err)
	}
	m := &storedModel{dir: dir}
	for i, name := range slices.Sorted(maps.Keys(files)) {
		f, err := copyVerified(dir, strconv.Itoa(i), files[name])
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("replay store: model %q: file %q: %w", modelPath, name, err)
		}
		f.name = name
		m.files = append(m.files, f)
	}
	return m, nil
}

// copyVerified copies the file at src to dir/name through a temporary
// file, recording the size and SHA-256 of what it read from src. It does
// not read the copy back: its one caller, RegisterModelFiles, streams the
// stored copy to the sidecar at once through stream, which reads it whole
// and checks both before the registration can complete.
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

// headers are the registration's file headers.
func (m *storedModel) headers() []*inferencepb.FileHeader {
	hs := make([]*inferencepb.FileHeader, len(m.files))
	for i, f := range m.files {
		hs[i] = &inferencepb.FileHeader{Path: f.name, Size: f.size}
	}
	return hs
}

// bytes is the registration's total file size.
func (m *storedModel) bytes() int64 {
	var n int64
	for _, f := range m.files {
		n += f.size
	}
	return n
}

// stream reads file i back in chunks of at most streamChunkBytes, handing
// each to send (which returns false once the receiver has stopped), and
// fails if the file is not what was registered: another size or another
// SHA-256. The receiver has then had bytes that must not be used; the
// caller abandons the registration.
func (m *storedModel) stream(i int, send func([]byte) bool) error {
	sf := m.files[i]
	f, err := os.Open(sf.blob)
	if err != nil {
		return fmt.Errorf("stored file %q: %w", sf.name, err)
	}
	defer f.Close()
	h := sha256.New()
	for left := sf.size; left > 0; {
		// A fresh buffer per chunk: gRPC may keep a sent message.
		buf := make([]byte, min(left, streamChunkBytes))
		if _, err := io.ReadFull(f, buf); err != nil {
			return fmt.Errorf("stored file %q (%s): %w: shorter than the %d bytes registered", sf.name, sf.blob, err, sf.size)
		}
		left -= int64(len(buf))
		h.Write(buf)
		if !send(buf) {
			return nil
		}
	}
	if n, _ := f.Read(make([]byte, 1)); n > 0 {
		return fmt.Errorf("stored file %q (%s): longer than the %d bytes registered", sf.name, sf.blob, sf.size)
	}
	return checkSum(sf, h)
}

func checkSum(sf storedFile, h hash.Hash) error {
	if got := h.Sum(nil); !bytes.Equal(got, sf.sum[:]) {
		return fmt.Errorf("stored file %q (%s): SHA-256 %x, registered %x: the file changed on disk after registration", sf.name, sf.blob, got, sf.sum)
	}
	return nil
}
