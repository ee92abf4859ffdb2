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
	"github.com/inferbid/inferbid/sidecar/registry"
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
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := serveOnSocket(t, ServerOptions{Runtime: rt, Settings: registry.Settings{SharedStateModels: []string{"shared/"}}, SequenceCleanerInterval: -1})
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

// shared_state_models is checked in the config (and at registration for a
// model it cannot apply to: the registry's TestSharedStateModelsRefusedAtRegistration).
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
}
