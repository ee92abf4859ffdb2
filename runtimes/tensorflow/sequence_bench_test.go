package tensorflow

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// wideSumModel is RunningSumModel with a state of n floats: input "x"
// FLOAT [n], output "sum" FLOAT [n].
func wideSumModel(b *testing.B, n int) *runtimes.Model {
	b.Helper()
	bd := tfsave.NewBuilderWith(tfsave.Options{})
	v := bd.Variable("running_sum", tensor.New("", []int64{int64(n)}, make([]float32, n)))
	x := bd.Placeholder("serving_default_x", tensor.Float, []int64{int64(n)})
	inc := bd.OpNamed("AssignAddVariableOp", "AssignAddVariableOp", []string{v.Handle, x}, nil)
	read := bd.OpNamed("ReadVariableOp", "ReadVariableOp", []string{v.Handle, "^" + inc}, map[string]any{"dtype": tensor.Float})
	y := bd.OpNamed("sum", "Identity", []string{read}, nil)
	bd.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"sum": y})
	files, err := bd.Files()
	if err != nil {
		b.Fatal(err)
	}
	return loadFiles(b, files, driver.Config{})
}

// BenchmarkSequence measures a sequence's start (the restore op on a copy
// of the variables), one call on a sequence against one call on the shared
// state (the per-call cost of resolving variables to the sequence's), calls
// of many sequences in parallel, and the memory a started sequence holds
// after its first call (bytes/seq).
func BenchmarkSequence(b *testing.B) {
	for _, n := range []int{1, 4096} {
		m := wideSumModel(b, n)
		in := []tensor.Tensor{tensor.New("x", []int64{int64(n)}, make([]float32, n))}
		b.Run(fmt.Sprintf("state=%d/start", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.NewSequenceState(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("state=%d/call-shared", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Predict(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("state=%d/call-sequence", n), func(b *testing.B) {
			st, err := m.NewSequenceState()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.PredictSequence(context.Background(), st, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("state=%d/call-sequence-parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				st, err := m.NewSequenceState()
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					if _, err := m.PredictSequence(context.Background(), st, in); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(fmt.Sprintf("state=%d/memory", n), func(b *testing.B) {
			const count = 1000
			states := make([]any, count)
			var before, after runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range states {
					st, err := m.NewSequenceState()
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.PredictSequence(context.Background(), st, in); err != nil {
						b.Fatal(err)
					}
					states[i] = st
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				clear(states)
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/count, "bytes/seq")
		})
	}
}
