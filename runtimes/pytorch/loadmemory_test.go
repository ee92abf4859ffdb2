//go:build pytorch && cgo

package pytorch_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// bigAffineModel is affine_v1.pt with the storage of its scalar "scale"
// grown to n float32s (the tensor still reads the first): a TorchScript
// file of about 4n bytes, built without Python. data.pkl names the storage
// size as BININT1 1; it becomes BININT n.
func bigAffineModel(t *testing.T, n int) driver.Files {
	t.Helper()
	src := readTestdata(t, "affine_v1.pt")["affine_v1.pt"]
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch f.Name {
		case "affine_v1/data.pkl":
			old := []byte("X\x03\x00\x00\x00cpuq\x06K\x01t")
			big := append([]byte("X\x03\x00\x00\x00cpuq\x06J"), byte(n), byte(n>>8), byte(n>>16), byte(n>>24), 't')
			if !bytes.Contains(b, old) {
				t.Fatal("affine_v1.pt's data.pkl does not name scale's storage as expected")
			}
			b = bytes.Replace(b, old, big, 1)
		case "affine_v1/data/0":
			scale := b
			b = make([]byte, 4*n)
			copy(b, scale)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: f.Method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return driver.Files{"affine_v1.pt": out.Bytes()}
}

// TestLoadedModelMemory reports the resident memory a loaded TorchScript
// model keeps relative to its file size (libtorch's allocations are
// native: the measure is the process's RSS with the Go heap returned to the
// OS), for a 128 MiB parameter storage. It fails only when a model holds
// three times its file size. go test -tags pytorch -v -run
// LoadedModelMemory ./runtimes/pytorch/
func TestLoadedModelMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("loads a 128 MiB model and measures resident memory (not under -short or -race)")
	}
	rt := openRuntime(t)
	load(t, rt, "affine_v1.pt") // libtorch's own start-up, outside the measure
	files := bigAffineModel(t, 32<<20)
	size := files.Size()
	runtime.GC()
	debug.FreeOSMemory()
	withFiles := testhelp.ProcStatus(t, os.Getpid(), "VmRSS")
	m, err := rt.Load(context.Background(), "big/", files)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	files = nil
	runtime.GC()
	debug.FreeOSMemory()
	held := testhelp.ProcStatus(t, os.Getpid(), "VmRSS") - (withFiles - size)
	ratio := float64(held) / float64(size)
	t.Logf("files %d MiB, resident memory held by the loaded model %d MiB: %.2fx the file size", size>>20, held>>20, ratio)
	if ratio > 3 {
		t.Errorf("the loaded model holds %.2fx its file size", ratio)
	}
}

// TestSidecarModelMemory: the same 128 MiB model registered in a real
// inference-sidecar-pytorch process.
func TestSidecarModelMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("registers a 128 MiB model")
	}
	bin := testhelp.BuildBinary(t, "cmd/inference-sidecar-pytorch", true, "-tags", "pytorch")
	sidecartest.ModelMemory(t, bin, bigAffineModel(t, 32<<20), 1.5)
}
