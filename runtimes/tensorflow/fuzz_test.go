package tensorflow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

const (
	indexFile = "variables/variables.index"
	dataFile  = "variables/variables.data-00000-of-00001"
)

// fuzzSeeds are small SavedModels in each layout tfsave writes.
func fuzzSeeds(tb testing.TB) []driver.Files {
	tb.Helper()
	var seeds []driver.Files
	add := func(files driver.Files, err error) {
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, files)
	}
	add(tfsave.AffineModel(tfsave.Options{}, 2, 1))
	add(tfsave.AffineModel(tfsave.Options{Variables: tfsave.RefVariables}, 2, 1))
	add(tfsave.MLP(tfsave.Options{FunctionCall: true}))
	add(tfsave.CounterModel(tfsave.Options{FunctionCall: true}, 1))
	add(tfsave.PCTRModel(tfsave.Options{}))
	// TF1 control flow: a while loop and a cond (tf1control_test.go).
	add(countingLoop(tb), nil)
	add(tf1CondModel(tb, true), nil)
	return seeds
}

// FuzzLoad feeds mutated saved_model.pb, variables.index and data shard
// bytes to Load, and runs whatever loads on zero inputs: nothing may panic
// or hang, and every failure must be an error.
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s["saved_model.pb"], s[indexFile], s[dataFile])
	}
	f.Fuzz(func(t *testing.T, pb, index, data []byte) {
		files := driver.Files{"saved_model.pb": pb, dataFile: data}
		if len(index) > 0 {
			files[indexFile] = index
		}
		bm, err := New(driver.Config{}).Load(context.Background(), files)
		if err != nil {
			return
		}
		defer bm.Close()
		var in []tensor.Tensor
		for _, spec := range bm.Signature().Inputs {
			shape := make([]int64, len(spec.Shape))
			for i, d := range spec.Shape {
				shape[i] = max(1, min(d, 4))
			}
			n, err := tensor.NumElements(shape, 1<<12)
			if err != nil {
				return
			}
			in = append(in, tensor.Tensor{Name: spec.Name, Shape: shape, Data: tensor.MakeData(spec.DType, int(n))})
		}
		_, _ = bm.Predict(context.Background(), in)
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzLoad when
// INFERBID_WRITE_SEEDS=1 (the seeds are committed).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("INFERBID_WRITE_SEEDS") != "1" {
		t.Skip("set INFERBID_WRITE_SEEDS=1 to regenerate testdata/fuzz/FuzzLoad")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzLoad")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\n[]byte(%q)\n", s["saved_model.pb"], s[indexFile], s[dataFile])
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
