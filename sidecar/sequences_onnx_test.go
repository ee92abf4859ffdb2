//go:build cgo

package sidecar

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/tensor"
)

// startONNXSequenceServer serves the ONNX runtime with sum/ configured as a
// stateful model (at most maxSeq sequences) on a real socket, and registers
// the committed running_sum.onnx there (state sum_in/sum_out).
func startONNXSequenceServer(t *testing.T, maxSeq uint32) (*Server, *Client) {
	t.Helper()
	_, err := onnx.FindLibrary("")
	testhelp.RequireNative(t, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
	settings := registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{
		"sum/":     {Stateful: true, MaxSequenceNumber: ptr(maxSeq)},
		"dynamic/": {Stateful: true},
		"affine/":  {Stateful: true},
	}}
	rt, err := runtimes.Open(onnx.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, c := serveOnSocket(t, ServerOptions{Runtime: rt, Settings: settings, SequenceCleanerInterval: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	files := runtimes.Files{"running_sum.onnx": testhelp.ReadFile(t, "runtimes/onnx/testdata/running_sum.onnx")}
	if err := c.RegisterModel(ctx, "sum/", files, ""); err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// Interleaved sequences of an ONNX model keep their own state (sum_in fed
// back from sum_out, hidden from the answer: sumAndID sees one output).
func TestONNXSequencesInterleavedKeepSeparateState(t *testing.T) {
	_, c := startONNXSequenceServer(t, 10)
	sumA, a := sumAndID(t, predictOne(t, c, seqEntry(1, -1, 1)))
	if a <= 0 || sumA != 1 {
		t.Fatalf("start without id: sum %v id %d, want 1 and an assigned id", sumA, a)
	}
	if sum, id := sumAndID(t, predictOne(t, c, seqEntry(100, 77, 1))); sum != 100 || id != 77 {
		t.Fatalf("start with id 77: sum %v id %d", sum, id)
	}
	steps := []struct {
		x    float32
		id   int64
		ctl  int32
		want float32
	}{{2, a, -1, 3}, {200, 77, 0, 300}, {3, a, 0, 6}, {300, 77, 2, 600}, {4, a, 2, 10}}
	for i, s := range steps {
		r := predictOne(t, c, seqEntry(s.x, s.id, s.ctl))
		if r.Err == nil && len(r.Tensors) != 2 {
			t.Fatalf("step %d: outputs %+v, want sum and sequence_id (the state hidden)", i, r.Tensors)
		}
		sum, id := sumAndID(t, r)
		if sum != s.want || id != s.id {
			t.Fatalf("step %d (sequence %d, +%v): sum %v id %d, want %v", i, s.id, s.x, sum, id, s.want)
		}
	}
	// Ended: 77 is free again and starts from zeros.
	if sum, id := sumAndID(t, predictOne(t, c, seqEntry(5, 77, 1))); sum != 5 || id != 77 {
		t.Fatalf("restart of 77: sum %v id %d, want 5", sum, id)
	}
}

func TestONNXSequenceErrors(t *testing.T) {
	srv, c := startONNXSequenceServer(t, 2)
	sumAndID(t, predictOne(t, c, seqEntry(1, 5, 1)))
	wantSequenceError(t, "id in use on start", predictOne(t, c, seqEntry(1, 5, 1)), inferr.ModelExecution, sequence.AlreadyExists, sequence.MsgAlreadyExists)
	wantSequenceError(t, "unknown id", predictOne(t, c, seqEntry(1, 6, -1)), inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
	wantSequenceError(t, "no id mid-sequence", predictOne(t, c, seqEntry(1, -1, -1)), inferr.InputParsing, sequence.InvalidArgument, sequence.MsgNoID)
	wantSequenceError(t, "control 3", predictOne(t, c, seqEntry(1, 5, 3)), inferr.InputParsing, sequence.InvalidArgument, sequence.MsgBadControlValue)
	// The state is the server's: feeding sum_in in a sequence is refused.
	e := seqEntry(1, 5, 0)
	e.Tensors = append(e.Tensors, tensor.New("sum_in", []int64{1}, []float32{1000}))
	errType(t, "state fed by the client", predictOne(t, c, e).Err, inferr.InputParsing, `"sum_in" is the sequence's state`)
	sumAndID(t, predictOne(t, c, seqEntry(1, -1, 1)))
	wantSequenceError(t, "limit reached", predictOne(t, c, seqEntry(1, -1, 1)), inferr.ModelExecution, sequence.Unavailable, sequence.MsgLimit)
	if sum, _ := sumAndID(t, predictOne(t, c, seqEntry(1, 5, 0))); sum != 2 {
		t.Fatalf("sequence 5 after the errors: sum %v, want 2", sum)
	}
	// Idle cleanup: 5 was just used, the other one was not.
	srv.SweepSequences()
	sumAndID(t, predictOne(t, c, seqEntry(1, 5, 0)))
	if n := srv.SweepSequences(); n != 1 {
		t.Fatalf("sweep removed %d sequences, want 1", n)
	}
	if sum, _ := sumAndID(t, predictOne(t, c, seqEntry(1, 5, 2))); sum != 4 {
		t.Fatalf("sequence 5 after the sweep: sum %v, want 4", sum)
	}
}

// ONNX models that cannot keep per-sequence state are refused at
// registration, naming the setting and the reason.
func TestONNXStatefulRegistrationRefused(t *testing.T) {
	_, c := startONNXSequenceServer(t, 2)
	ctx := context.Background()
	err := c.RegisterModel(ctx, "dynamic/", runtimes.Files{"m.onnx": testhelp.ReadFile(t, "runtimes/onnx/testdata/dynamic_state.onnx")}, "")
	errType(t, "dynamic state", err, inferr.InputParsing, `stateful_models["dynamic/"].stateful`, `"sum_in"`, "dynamic shape [-1]")
	err = c.RegisterModel(ctx, "affine/", runtimes.Files{"m.onnx": testhelp.ReadFile(t, "runtimes/onnx/testdata/affine_v1.onnx")}, "")
	errType(t, "no state", err, inferr.InputParsing, `stateful_models["affine/"].stateful`, "no state")
	if r := predictOne(t, c, batch.Entry{ModelPath: "dynamic/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1}, []float32{1})}}); r.Err == nil {
		t.Fatal("the refused model serves")
	}
}
