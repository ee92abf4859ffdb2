package tensorflow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// stateBenchModel is a running sum over a state of n floats (input "x"
// FLOAT [n], output "sum") beside extra variables that serving does not
// use at run time (as weights it only reads, which are folded at load):
// each is an entry of a call's table all the same.
func stateBenchModel(b *testing.B, n, extra int) *model {
	b.Helper()
	bd := tfsave.NewBuilderWith(tfsave.Options{})
	v := bd.Variable("running_sum", tensor.New("", []int64{int64(n)}, make([]float32, n)))
	for i := range extra {
		bd.Variable(fmt.Sprintf("w%d", i), tensor.New("", []int64{}, []float32{0}))
	}
	x := bd.Placeholder("serving_default_x", tensor.Float, []int64{int64(n)})
	inc := bd.OpNamed("AssignAddVariableOp", "AssignAddVariableOp", []string{v.Handle, x}, nil)
	read := bd.OpNamed("ReadVariableOp", "ReadVariableOp", []string{v.Handle, "^" + inc}, map[string]any{"dtype": tensor.Float})
	y := bd.OpNamed("sum", "Identity", []string{read}, nil)
	bd.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"sum": y})
	files, err := bd.Files()
	if err != nil {
		b.Fatal(err)
	}
	return loadBackend(b, files)
}

func loadBackend(b *testing.B, files driver.Files) *model {
	b.Helper()
	dm, err := New(driver.Config{}).Load(context.Background(), files)
	if err != nil {
		b.Fatal(err)
	}
	return dm.(*model)
}

// alternate calls a and b in alternating blocks, so that both see the
// same load on a shared machine, and reports each one's time per call and
// their difference (b's cost over a) as metrics named after them; ns/op
// and allocs/op are their mean.
func alternate(b *testing.B, nameA string, a func() error, nameB string, fb func() error) {
	b.Helper()
	// Blocks are timed as a whole: a clock read per call would cost about
	// as much as the differences measured.
	const block = 64
	f := [2]func() error{a, fb}
	var took [2]time.Duration
	var calls [2]int
	n := 0
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		side := (n / block) % 2
		if err := f[side](); err != nil {
			b.Fatal(err)
		}
		n++
		if n%block == 0 {
			now := time.Now()
			took[side] += now.Sub(start)
			calls[side] += block
			start = now
		}
	}
	if calls[1] == 0 {
		return // too few calls to compare (b.N = 1 on the first round)
	}
	na := float64(took[0].Nanoseconds()) / float64(calls[0])
	nb := float64(took[1].Nanoseconds()) / float64(calls[1])
	b.ReportMetric(na, nameA+"-ns/op")
	b.ReportMetric(nb, nameB+"-ns/op")
	b.ReportMetric(nb-na, "cost-ns/op")
	b.ReportMetric(100*(nb-na)/na, "cost-%")
}

// BenchmarkModelState measures what keeping state from crossing requests
// costs (docs/architecture.md, "Stateful models and sequences"). Each
// pair runs in alternating blocks (alternate), so the cost is measured
// under the same load:
//
//   - no-state: a model that assigns no variable (the benchmark MLP, batch
//     1): plain (the program run alone, serveOnce) against predict
//     (model.Predict). The cost is all the isolation costs such a model.
//   - state=N,vars=V: a running sum over N floats in a model of V
//     variables (V-1 of them not used at run time, as folded weights):
//     shared (the opt-out: the shared values under the model's lock)
//     against per-call (the default: a table of its own per call).
//   - .../parallel-*: the same calls from every core (ns/op): per-call
//     calls run at once, shared calls one at a time.
func BenchmarkModelState(b *testing.B) {
	ctx := context.Background()
	mlp, err := tfsave.MLP(tfsave.Options{})
	if err != nil {
		b.Fatal(err)
	}
	m := loadBackend(b, mlp)
	in := []tensor.Tensor{tensor.New("x", []int64{1, 8}, make([]float32, 8))}
	b.Run("no-state", func(b *testing.B) {
		alternate(b, "plain", func() error {
			_, err := m.serveOnce(ctx, in)
			return err
		}, "predict", func() error {
			_, err := m.Predict(ctx, in)
			return err
		})
	})
	for _, c := range []struct{ n, extra int }{{1, 0}, {4096, 0}, {1, 255}} {
		per := stateBenchModel(b, c.n, c.extra)
		shared := stateBenchModel(b, c.n, c.extra)
		if err := shared.ShareState(); err != nil {
			b.Fatal(err)
		}
		in := []tensor.Tensor{tensor.New("x", []int64{int64(c.n)}, make([]float32, c.n))}
		name := fmt.Sprintf("state=%d,vars=%d", c.n, c.extra+1)
		b.Run(name, func(b *testing.B) {
			alternate(b, "shared", func() error {
				_, err := shared.Predict(ctx, in)
				return err
			}, "per-call", func() error {
				_, err := per.Predict(ctx, in)
				return err
			})
		})
		for _, mm := range []struct {
			mode string
			m    *model
		}{{"per-call", per}, {"shared", shared}} {
			b.Run(name+"/parallel-"+mm.mode, func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := mm.m.Predict(ctx, in); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
