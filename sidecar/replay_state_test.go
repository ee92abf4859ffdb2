package sidecar_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// A sidecar restart's replay brings no model state back: models come back
// as loaded from their bytes (with their warm-up run again), sequences do
// not come back at all.
//
// counter/ is an ordinary stateful model: 2 on every request, before and
// after. shared/ (shared_state_models) counts across requests until the
// kill, then starts again from the checkpoint plus the replayed warm-up.
// sum/ is served with sequences: the sequence started before the kill is
// unknown after it. Verified to fail with the mechanisms removed: without
// per-call tables (model.Predict on the shared values) counter/ answers 4
// after the replay (its replayed warm-up and the poll counted 2 and 3);
// without the kill (a sidecar that kept its state) shared/ answers 7.
func TestSupervisorReplayResurrectsNoModelState(t *testing.T) {
	bin := buildBinary(t, "inference-sidecar-tensorflow", false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath:    bin,
		SocketPath:    filepath.Join(testhelp.ShortDir(t), "sup.sock"),
		RuntimeConfig: `{"shared_state_models": ["shared/"]}`,
		MinBackoff:    50 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(tLogWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	counter, err := tfsave.CounterModel(tfsave.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"counter/", "shared/"} {
		warmUp := fmt.Sprintf(`{"request":[{"model_path":%q,"tensors":[{"tensor_name":"input_1","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}]}`, path)
		if err := sup.RegisterModel(ctx, path, counter, warmUp); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.RegisterModelWithSequences(ctx, "sum/", sum, "", &runtimes.SequenceSettings{Stateful: true}); err != nil {
		t.Fatal(err)
	}
	c := sup.Client()
	count := func(path string) (int32, error) {
		res, err := c.Predict(ctx, []batch.Entry{{ModelPath: path, Tensors: []tensor.Tensor{tensor.New("input_1", []int64{1}, []float32{1})}}})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			return 0, err
		}
		v, _ := tensor.Data[int32](res[0].Tensors[0])
		return v[0], nil
	}
	seq := func(x float32, ctl int32) (float32, error) {
		res, err := c.Predict(ctx, []batch.Entry{{ModelPath: "sum/", Tensors: []tensor.Tensor{
			tensor.New("x", []int64{1}, []float32{x}),
			tensor.New(sidecar.SequenceIDName, []int64{1}, []int64{7}),
			tensor.New(sidecar.SequenceControlName, []int64{1}, []int32{ctl})}}})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			return 0, err
		}
		return res[0].Tensors[0].Data.([]float32)[0], nil
	}
	want := func(what string, got, want any, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s: %v (%v), want %v", what, got, err, want)
		}
	}
	for range 3 {
		v, err := count("counter/")
		want("counter/ before the kill", v, int32(2), err)
	}
	for _, w := range []int32{3, 4, 5} { // the warm-up counted 2
		v, err := count("shared/")
		want("shared/ before the kill", v, w, err)
	}
	s, err := seq(5, 1)
	want("sequence 7 start", s, float32(5), err)
	s, err = seq(1, 0)
	want("sequence 7 before the kill", s, float32(6), err)

	if err := syscall.Kill(sup.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Wait for every model: the replay registers them one by one.
	for _, path := range []string{"counter/", "shared/"} {
		for {
			_, err := count(path)
			if err == nil {
				break
			}
			if tt := inferr.TypeOf(err); tt != inferr.GRPC && tt != inferr.ModelNotFound {
				t.Fatalf("%s after the kill: %v", path, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("the sidecar never came back: %v", err)
			}
			time.Sleep(20 * time.Millisecond) // a poll while the supervisor restarts the child
		}
	}
	// The polls above made one call each: counter/ still answers 2, and
	// shared/ went on from the replayed warm-up's 2 (3 was the poll's).
	v, err := count("counter/")
	want("counter/ after the replay", v, int32(2), err)
	v, err = count("shared/")
	want("shared/ after the replay", v, int32(4), err)
	for {
		_, err = seq(1, 0)
		if code, ok := sequence.CodeOf(err); ok && code == sequence.NotFound {
			break // its state died with the sidecar
		}
		if tt := inferr.TypeOf(err); err == nil || tt != inferr.GRPC && tt != inferr.ModelNotFound {
			t.Fatalf("sequence 7 after the kill: %v, want NOT_FOUND (its state died with the sidecar)", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("sum/ never came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, err = seq(1, 1)
	want("sequence 7 started again", s, float32(1), err)
}
