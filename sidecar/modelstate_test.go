package sidecar

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// No model state crosses requests through the sidecar: a TensorFlow model
// that assigns variables, registered as an ordinary model, answers every
// request over the socket as a freshly loaded model does; it keeps state
// within a sequence, and across requests only when the runtime config
// lists it in shared_state_models.
//
// Verified to fail with the mechanism removed: with the TensorFlow
// runtime's per-call tables replaced by the shared values (model.Predict
// calling serveOnce without withVarEnv), counter/ answers 3, 4, ... and the
// reference model 3, 4, 5, 6, 7 (the symptom), and
// TestBatchingKeepsCallersRowsApart's answers accumulate; with the
// batcher's stateful check removed (batchable), that test's callers get
// each other's rows.

// counterWarmUp is a warm-up batch for the counter model (input_1 FLOAT [1]).
func counterWarmUp(path string) string {
	return fmt.Sprintf(`{"request":[{"model_path":%q,"tensors":[{"tensor_name":"input_1","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}]}`, path)
}

func counterEntry(path string) batch.Entry {
	return batch.Entry{ModelPath: path, Tensors: []tensor.Tensor{tensor.New("input_1", []int64{1}, []float32{1})}}
}

// counts sends one request per want to path (the counter model or B&A's
// stateful model: an INT32 scalar output) and checks the answers.
func counts(t *testing.T, c *Client, path string, want ...int32) {
	t.Helper()
	for i, w := range want {
		res, err := c.Predict(context.Background(), []batch.Entry{counterEntry(path)})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil {
			t.Fatalf("%s request %d: %v", path, i+1, res[0].Err)
		}
		got, ok := tensor.Data[int32](res[0].Tensors[0])
		if !ok || len(got) != 1 || got[0] != w {
			t.Fatalf("%s request %d answered %v, want %d", path, i+1, res[0].Tensors[0].Data, w)
		}
	}
}

func TestNoStateCrossesRequestsOverTheSocket(t *testing.T) {
	cfg := runtimes.Config{SharedStateModels: []string{"shared/"}}
	rt, err := runtimes.Open(tensorflow.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, c := serveOnSocket(t, ServerOptions{Runtime: rt, SequenceCleanerInterval: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counter, err := tfsave.CounterModel(tfsave.Options{FunctionCall: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The warm-up assigns too: it leaves nothing behind either.
	for _, path := range []string{"counter/", "shared/"} {
		if err := c.RegisterModel(ctx, path, counter, counterWarmUp(path)); err != nil {
			t.Fatal(err)
		}
	}
	counts(t, c, "counter/", 2, 2, 2, 2, 2, 2)
	// Entries of one request are calls of their own too, and so are
	// concurrent requests.
	res, err := c.Predict(ctx, []batch.Entry{counterEntry("counter/"), counterEntry("counter/"), counterEntry("counter/")})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if got, _ := tensor.Data[int32](r.Tensors[0]); r.Err != nil || got[0] != 2 {
			t.Fatalf("entry %d of one request: %v %v, want 2", i, r.Tensors, r.Err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				res, err := c.Predict(ctx, []batch.Entry{counterEntry("counter/")})
				if err != nil || res[0].Err != nil {
					t.Error(err, res[0].Err)
					return
				}
				if got, _ := tensor.Data[int32](res[0].Tensors[0]); got[0] != 2 {
					t.Errorf("a concurrent request answered %d, want 2", got[0])
					return
				}
			}
		})
	}
	wg.Wait()
	// The opt-out shares one state, as B&A does: the warm-up counted 2.
	counts(t, c, "shared/", 3, 4, 5)

	dir, ok := testhelp.LookupReferenceModels(t)
	if !ok {
		t.Log("INFERBID_REFERENCE_MODELS is unset: B&A's stateful model is not checked")
		return
	}
	stateful, err := modelfiles.ReadLocal(filepath.Join(dir, "bidding-auction-servers/tensorflow/stateful"))
	if err != nil {
		t.Fatal(err)
	}
	// The case: six separate requests to B&A's stateful model
	// registered as an ordinary model answered 2, 3, 4, 5, 6, 7.
	if err := c.RegisterModel(ctx, "stateful/", stateful, ""); err != nil {
		t.Fatal(err)
	}
	counts(t, c, "stateful/", 2, 2, 2, 2, 2, 2)
	// Served with sequences (its model_metadata entry's settings), it
	// counts within a sequence, and only there.
	if err := c.RegisterModelWithSequences(ctx, "stateful-seq/", stateful, "", &runtimes.SequenceSettings{Stateful: true}); err != nil {
		t.Fatal(err)
	}
	step := func(id int64, ctl int32, want int32) {
		t.Helper()
		e := counterEntry("stateful-seq/")
		e.Tensors = append(e.Tensors, tensor.New(SequenceIDName, []int64{1}, []int64{id}), tensor.New(SequenceControlName, []int64{1}, []int32{ctl}))
		res, err := c.Predict(ctx, []batch.Entry{e})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil {
			t.Fatalf("sequence %d: %v", id, res[0].Err)
		}
		if got, _ := tensor.Data[int32](res[0].Tensors[0]); got[0] != want {
			t.Fatalf("sequence %d answered %d, want %d", id, got[0], want)
		}
	}
	step(1, 1, 2)
	step(1, 0, 3)
	step(2, 1, 2)
	counts(t, c, "stateful/", 2)
	step(1, 0, 4)
	step(2, 2, 3)
	step(1, 2, 5)
	step(1, 1, 2) // ended: a new sequence 1 starts from the checkpoint
}

// shared_state_models is checked: in the config, and at registration for a
// model it cannot apply to.
func TestSharedStateModelsRefused(t *testing.T) {
	for js, want := range map[string]string{
		`{"shared_state_models": [""]}`:                                                          `shared_state_models[0]: the model path is empty`,
		`{"shared_state_models": ["a/", "b/", "a/"]}`:                                            `shared_state_models[2]: "a/" is listed twice`,
		`{"shared_state_models": ["m/"], "stateful_models": {"m/": {"stateful": true}}}`:         `shared_state_models[0] is "m/", which stateful_models["m/"] serves with sequences`,
		`{"shared_state_models": "m/"}`:                                                          `shared_state_models`,
		`{"shared_state_models": ["m/"], "stateful_models": {"m/": {"max_sequence_number": 2}}}`: `stateful_models["m/"].max_sequence_number is set but stateful is not true`,
	} {
		_, err := ParseRuntimeConfig(js)
		errType(t, js, err, inferr.InputParsing, want)
	}
	cfg, err := ParseRuntimeConfig(`{"shared_state_models": ["a/", "b/"], "model_reset_probability": 0.25, "stateful_models": {"a/": {"stateful": false}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.SharedStateModels, []string{"a/", "b/"}) || cfg.ModelResetProbability != 0.25 {
		t.Fatalf("parsed %+v", cfg)
	}

	ctx := context.Background()
	tf, err := runtimes.Open(tensorflow.Name, runtimes.Config{SharedStateModels: []string{"affine/", "counter/"}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(tf, 1<<30, batch.Limits{}.WithDefaults(), quietLog)
	defer r.close()
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
	_, err = r.registerWith(ctx, "counter/", counter, "", &runtimes.SequenceSettings{Stateful: true})
	errType(t, "listed and registered with sequences", err, inferr.InputParsing, `shared_state_models[1]`, "model_metadata entry's) stateful", "not both")
	if r.lookup("affine/") != nil || r.lookup("counter/") != nil {
		t.Fatal("a refused model was published")
	}
	if _, err := r.register(ctx, "counter/", counter, ""); err != nil {
		t.Fatal(err)
	}

	// A runtime without shared state (the affine fake, as ONNX and PyTorch).
	fake, _ := newAffineRuntimeWith(runtimes.Config{SharedStateModels: []string{"a/"}})
	rf := newRegistry(fake, 1<<20, batch.Limits{}.WithDefaults(), quietLog)
	defer rf.close()
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
	rt, err := runtimes.Open(tensorflow.Name, withBatching(runtimes.Config{}, map[string]runtimes.BatchSettings{
		"rowsum/": {MaxBatchSize: total, MaxDelayMicros: forever},
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r, logs := batchingRegistry(t, rt)
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
	if st := r.batchingStats(); len(st) != 0 {
		t.Errorf("batching stats %+v: the stateful model has a batcher", st)
	}
}
