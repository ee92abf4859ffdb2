package registry

import (
	"context"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// shared_state_models is checked at registration: a model it cannot apply
// to is refused, naming the setting, and not published.
func TestSharedStateModelsRefusedAtRegistration(t *testing.T) {
	ctx := context.Background()
	tf, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRegistryWith(t, tf, Options{Settings: Settings{SharedStateModels: []string{"affine/", "counter/"}}})
	affine, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.register(ctx, "affine/", affine, "")
	errType(t, "stateless TF model listed", err, inferr.InputParsing, `shared_state_models[0]`, "assigns no variables")
	counter, err := tfsave.CounterModel(tfsave.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Register(ctx, "counter/", counter, "", &runtimes.SequenceSettings{Stateful: true})
	errType(t, "listed and registered with sequences", err, inferr.InputParsing, `shared_state_models[1]`, "model_metadata entry's) stateful", "not both")
	if r.lookup("affine/") != nil || r.lookup("counter/") != nil {
		t.Fatal("a refused model was published")
	}
	if _, err := r.register(ctx, "counter/", counter, ""); err != nil {
		t.Fatal(err)
	}

	// A runtime without shared state (the affine fake, as ONNX and PyTorch).
	fake, _ := newAffineRuntime()
	rf := newTestRegistryWith(t, fake, Options{Settings: Settings{SharedStateModels: []string{"a/"}}})
	_, err = rf.register(ctx, "a/", affineFiles("2 1"), "")
	errType(t, "runtime without shared state", err, inferr.InputParsing, `shared_state_models[0]`, "keeps no state shared by calls")
}

// rowSumModel assigns a variable from the rows of its batch: y = x +
// (v + sum(x)), v restored as 0, x FLOAT [-1]. Alone, a call answers
// x + sum(its own x). Merged with other calls (one batch) or after them
// (shared state), the answer would hold their rows too.
func rowSumModel(t *testing.T) runtimes.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	v := b.Variable("total", tensor.New("", []int64{}, []float32{0}))
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1})
	axis := tfsave.ConstOf[int32](b, "axis", []int64{1}, 0)
	sum := b.OpNamed("sum", "Sum", []string{x, axis}, nil)
	inc := b.OpNamed("AssignAddVariableOp", "AssignAddVariableOp", []string{v.Handle, sum}, nil)
	read := b.OpNamed("ReadVariableOp", "ReadVariableOp", []string{v.Handle, "^" + inc}, map[string]any{"dtype": tensor.Float})
	y := b.OpNamed("y", "AddV2", []string{x, read}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Dynamic batching never puts one caller's rows into another's answer: a
// model whose state mixes a batch's rows is never merged, and each call
// starts from the load-time state. Every caller of a batch that would run
// only when full (all of them) gets x + sum(its own x).
func TestBatchingKeepsCallersRowsApart(t *testing.T) {
	const callers = 12
	rowsOf := func(i int) int { return 1 + i%4 }
	total := 0
	for i := range callers {
		total += rowsOf(i)
	}
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r, logs := batchingRegistry(t, rt, batching(map[string]BatchSettings{
		"rowsum/": {MaxBatchSize: total, MaxDelayMicros: forever},
	}))
	register(t, r, "rowsum/", rowSumModel(t))
	wantLog(t, logs, `model_path=rowsum/ reason="the model is stateful"`, 1)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for round := range 5 {
				x := make([]float32, rowsOf(i))
				var s float32
				for j := range x {
					x[j] = float32(1000*i + 10*round + j)
					s += x[j]
				}
				out, err := r.predict(context.Background(), "rowsum/", []tensor.Tensor{tensor.New("x", []int64{int64(len(x))}, x)})
				if err != nil {
					t.Error(err)
					return
				}
				got := out[0].Data.([]float32)
				for j := range x {
					if got[j] != x[j]+s {
						t.Errorf("caller %d round %d: %v for rows %v, want each row + %v: other calls' rows reached this answer", i, round, got, x, s)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if st := r.BatchingStats(); len(st) != 0 {
		t.Errorf("batching stats %+v: the stateful model has a batcher", st)
	}
}

// A model that cannot keep per-sequence state is refused at registration,
// naming the setting: a runtime without sequences (the affine fake), and a
// TensorFlow model that assigns no variables.
func TestStatefulRegistrationRefused(t *testing.T) {
	opts := Options{Settings: Settings{StatefulModels: map[string]runtimes.SequenceSettings{"a/": {Stateful: true}}}}
	rt, _ := newAffineRuntime()
	r := newTestRegistryWith(t, rt, opts)
	_, err := r.register(context.Background(), "a/", affineFiles("2 1"), "")
	errType(t, "affine stateful", err, inferr.InputParsing, `stateful_models["a/"].stateful`, "per-sequence state")

	tf, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rtf := newTestRegistryWith(t, tf, opts)
	files, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rtf.register(context.Background(), "a/", files, "")
	errType(t, "stateless TF model as stateful", err, inferr.InputParsing, `stateful_models["a/"].stateful`, "no state")
	if rtf.lookup("a/") != nil {
		t.Fatal("the refused model was published")
	}
}
