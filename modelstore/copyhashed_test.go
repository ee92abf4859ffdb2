package modelstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TestCopyHashed: a download's bytes reach the file and the hash whole,
// at every size around the chunk boundaries, from parallel downloads that
// share the watcher's lock; a read error is returned.
func TestCopyHashed(t *testing.T) {
	w := &Watcher{}
	dir := t.TempDir()
	sizes := []int{0, 1, downloadChunk - 1, downloadChunk, downloadChunk + 1, 3*downloadChunk + 7}
	var wg sync.WaitGroup
	for i, size := range sizes {
		wg.Go(func() {
			data := make([]byte, size)
			for j := range data {
				data[j] = byte(j*31 + i)
			}
			f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
			if err != nil {
				t.Error(err)
				return
			}
			h := sha256.New()
			// A reader that returns short reads, as a network body does.
			n, err := w.copyHashed(f, h, io.MultiReader(bytes.NewReader(data[:size/3]), bytes.NewReader(data[size/3:])), make([]byte, downloadChunk))
			f.Close()
			got, rerr := os.ReadFile(f.Name())
			if err != nil || rerr != nil || n != int64(size) || !bytes.Equal(got, data) {
				t.Errorf("size %d: copied %d (%v, %v), file equal %v", size, n, err, rerr, bytes.Equal(got, data))
			}
			if sum := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), sum[:]) {
				t.Errorf("size %d: hash %x, want %x", size, h.Sum(nil), sum)
			}
		})
	}
	wg.Wait()
	f, err := os.Create(filepath.Join(dir, "broken"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	boom := errors.New("connection reset")
	if _, err := w.copyHashed(f, sha256.New(), io.MultiReader(bytes.NewReader(make([]byte, 10)), &failingReader{boom}), make([]byte, downloadChunk)); !errors.Is(err, boom) {
		t.Errorf("a failing read: %v, want %v", err, boom)
	}
}

type failingReader struct{ err error }

func (r *failingReader) Read([]byte) (int, error) { return 0, r.err }

// TestCopyHashedTruncatedBody: a body that ends early fails with
// io.ErrUnexpectedEOF (net/http's truncated response): copyHashed must
// return it, not take it for the end of the object, or a truncated model
// without a listed checksum would be registered.
func TestCopyHashedTruncatedBody(t *testing.T) {
	w := &Watcher{}
	for _, size := range []int{0, 10, downloadChunk, downloadChunk + 10} {
		f, err := os.Create(filepath.Join(t.TempDir(), "truncated"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.copyHashed(f, sha256.New(), io.MultiReader(bytes.NewReader(make([]byte, size)), &failingReader{io.ErrUnexpectedEOF}), make([]byte, downloadChunk))
		f.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("a body truncated after %d bytes: %v, want %v", size, err, io.ErrUnexpectedEOF)
		}
	}
}
