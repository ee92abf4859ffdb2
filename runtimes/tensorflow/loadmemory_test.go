package tensorflow

import (
	"context"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// heapObjects is the bytes of live and not yet swept heap objects; after a
// runtime.GC it is the live heap.
func heapObjects() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// TestLoadedModelMemory reports how much heap a loaded model keeps
// relative to its file size, for a 128 MiB dense layer (one [1024,32768]
// FLOAT variable), in the TF2 and TF1 layouts. It fails only when a model
// holds twice its files (a copy of the file bytes kept beside the decoded
// tensors). go test -v -run LoadedModelMemory ./runtimes/tensorflow/
func TestLoadedModelMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 128 MiB model")
	}
	const in, out = 1024, 32768
	for name, opts := range map[string]tfsave.Options{
		"tf2-function": {FunctionCall: true},
		"tf1":          {Variables: tfsave.RefVariables},
	} {
		t.Run(name, func(t *testing.T) {
			b := tfsave.NewBuilderWith(opts)
			x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, in})
			w := make([]float32, in*out)
			for i := range w {
				w[i] = float32(i%97) / 97
			}
			k := b.Variable("dense/kernel", tensor.New("", []int64{in, out}, w))
			w = nil
			y := b.OpNamed("y", "MatMul", []string{x, k.Value}, nil)
			b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
			files, err := b.Files()
			if err != nil {
				t.Fatal(err)
			}
			b = nil
			var size int64
			for _, f := range files {
				size += int64(len(f))
			}
			rt, err := runtimes.Open(Name, runtimes.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()

			runtime.GC()
			withFiles := heapObjects()
			m, err := rt.Load(context.Background(), "big/", files)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			files = nil
			runtime.GC()
			held := int64(heapObjects()) - (int64(withFiles) - size)
			ratio := float64(held) / float64(size)
			t.Logf("%s: files %d MiB, heap held by the loaded model %d MiB: %.2fx the file size", name, size>>20, held>>20, ratio)
			if ratio > 1.9 {
				t.Errorf("the loaded model holds %.2fx its file size: are the file bytes kept beside the decoded tensors?", ratio)
			}
			if p := os.Getenv("TFMEM_PROFILE"); p != "" {
				f, _ := os.Create(p + "." + name)
				pprof.WriteHeapProfile(f)
				f.Close()
			}
			runtime.KeepAlive(m)
		})
	}
}
