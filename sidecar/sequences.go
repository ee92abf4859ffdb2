package sidecar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/tensor"
)

// The names of the special inputs (and of the sequence_id output) of a
// stateful model's requests, as OpenVINO Model Server names them.
const (
	SequenceIDName      = "sequence_id"
	SequenceControlName = "sequence_control_input"
)

// startSequences gives m a sequence manager when the runtime config lists
// path as stateful (before m is published). A model that cannot keep one
// state per sequence is refused, naming the setting.
func (r *registry) startSequences(path string, m *runtimes.Model) error {
	set, ok := r.rt.Config().StatefulModels[path]
	if !ok || !set.Stateful {
		return nil
	}
	if !m.SupportsSequences() {
		return inferr.Errorf(inferr.InputParsing, "register model %s: runtime config stateful_models[%q].stateful is true, but the %s runtime keeps no per-sequence state", inferr.Quote(path), path, r.rt.Name())
	}
	if !m.Stateful() {
		return inferr.Errorf(inferr.InputParsing, "register model %s: runtime config stateful_models[%q].stateful is true, but the model has no state (a TensorFlow model assigns no variables; an ONNX model has no <name>_in input fed back from a <name>_out output; a PyTorch model has no forward() argument <name>_in or no initial_state())", inferr.Quote(path), path)
	}
	// A state the runtime cannot make (an ONNX state of dynamic shape) is
	// refused now, not at every sequence start.
	if _, err := m.NewSequenceState(); err != nil {
		return inferr.Errorf(inferr.InputParsing, "register model %s: runtime config stateful_models[%q].stateful is true, but a sequence cannot start: %w", inferr.Quote(path), path, err)
	}
	opts := sequence.Options{Name: path}
	if set.MaxSequenceNumber != nil {
		opts.MaxSequences = int(*set.MaxSequenceNumber)
	}
	opts.NoIdleCleanup = set.IdleSequenceCleanup != nil && !*set.IdleSequenceCleanup
	r.sequences.Store(m, sequence.NewManager(opts, m.NewSequenceState))
	return nil
}

// stopSequences drops m's sequences (m was replaced, deleted or never
// published): a reload starts with none.
func (r *registry) stopSequences(m *runtimes.Model) {
	if v, ok := r.sequences.LoadAndDelete(m); ok {
		v.(*sequence.Manager).Close()
	}
}

// sweepSequences removes the idle sequences of every published model.
func (r *registry) sweepSequences() int {
	n := 0
	cur := *r.models.Load()
	for _, path := range slices.Sorted(maps.Keys(cur)) {
		if v, ok := r.sequences.Load(cur[path]); ok {
			if k := v.(*sequence.Manager).Sweep(); k > 0 {
				r.log.Info("removed idle sequences", "model_path", path, "sequences", k)
				n += k
			}
		}
	}
	return n
}

// runSequenceCleaner sweeps every interval until stop is closed.
func (r *registry) runSequenceCleaner(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.sweepSequences()
		}
	}
}

// callSequence runs a request of a stateful model with sequences: the
// special inputs are taken out, the rest runs on the sequence's state, and
// sequence_id is appended to the outputs in the form it came in (INT64 [1]
// when it was absent). Sequence errors keep OpenVINO Model Server's
// messages, which name their class (sequence.ClassOf), under the closest
// of the six types: INVALID_ARGUMENT is INPUT_PARSING, NOT_FOUND
// MODEL_NOT_FOUND, the others MODEL_EXECUTION.
func (r *registry) callSequence(ctx context.Context, m *runtimes.Model, mgr *sequence.Manager, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	path := m.Path()
	id, ctl, idIn, rest, err := sequenceInputs(path, inputs)
	if err != nil {
		return nil, err
	}
	var out []tensor.Tensor
	id, err = mgr.Run(ctx, id, ctl, func(st any) error {
		var err error
		out, err = m.PredictSequence(ctx, st, rest)
		return err
	})
	if errors.Is(err, sequence.ErrClosed) {
		// The model was replaced or deleted: predict retries on the new one.
		return nil, inferr.Wrap(inferr.ModelNotFound, err, "model "+inferr.Quote(path))
	}
	if err != nil {
		return nil, typeSequenceError(err)
	}
	idOut := tensor.New(SequenceIDName, []int64{1}, []int64{int64(id)})
	if idIn != nil {
		same := tensor.Tensor{Name: SequenceIDName, Shape: slices.Clone(idIn.Shape), Data: tensor.MakeData(idIn.DType(), idIn.Len())}
		if setInteger(same, id) {
			idOut = same
		}
	}
	return append(out, idOut), nil
}

func typeSequenceError(err error) error {
	code, ok := sequence.CodeOf(err)
	if !ok {
		return err
	}
	switch code {
	case sequence.InvalidArgument:
		return inferr.Wrap(inferr.InputParsing, err, "")
	case sequence.NotFound:
		return inferr.Wrap(inferr.ModelNotFound, err, "")
	}
	return inferr.Wrap(inferr.ModelExecution, err, "")
}

// sequenceInputs takes sequence_id and sequence_control_input out of
// inputs. Each must be an integer tensor of one element (shape [1] or a
// scalar) and in range: a uint64 id, a uint32 control.
func sequenceInputs(path string, inputs []tensor.Tensor) (id uint64, ctl sequence.Control, idIn *tensor.Tensor, rest []tensor.Tensor, err error) {
	rest = make([]tensor.Tensor, 0, len(inputs))
	seen := map[string]bool{}
	for i := range inputs {
		in := &inputs[i]
		if in.Name != SequenceIDName && in.Name != SequenceControlName {
			rest = append(rest, *in)
			continue
		}
		if seen[in.Name] {
			return 0, 0, nil, nil, inferr.Errorf(inferr.InputParsing, "model %s: input %s is given twice", inferr.Quote(path), in.Name)
		}
		seen[in.Name] = true
		v, err := oneInteger(in)
		if err != nil {
			return 0, 0, nil, nil, inferr.Errorf(inferr.InputParsing, "model %s: input %s: %w", inferr.Quote(path), in.Name, err)
		}
		if in.Name == SequenceIDName {
			if v < 0 {
				return 0, 0, nil, nil, inferr.Errorf(inferr.InputParsing, "model %s: input %s is %d, want a uint64 (0 for none)", inferr.Quote(path), in.Name, v)
			}
			id, idIn = uint64(v), in
			continue
		}
		if v < 0 || v > 1<<32-1 {
			return 0, 0, nil, nil, inferr.Errorf(inferr.InputParsing, "model %s: input %s is %d, want 0 (none), 1 (start) or 2 (end): %s", inferr.Quote(path), in.Name, v, sequence.MsgBadControlValue)
		}
		ctl = sequence.Control(v)
	}
	return id, ctl, idIn, rest, nil
}

// oneInteger reads the value of an integer tensor of one element.
func oneInteger(t *tensor.Tensor) (int64, error) {
	if t.Len() != 1 || len(t.Shape) > 1 {
		return 0, fmt.Errorf("shape %v, want [1] (one value)", t.Shape)
	}
	switch d := t.Data.(type) {
	case []int64:
		return d[0], nil
	case []int32:
		return int64(d[0]), nil
	case []int16:
		return int64(d[0]), nil
	case []int8:
		return int64(d[0]), nil
	}
	return 0, fmt.Errorf("dtype %v, want an integer", t.DType())
}

// setInteger stores id in a one-element integer tensor and reports whether
// it fits its dtype (an assigned id may not fit an INT8 input).
func setInteger(t tensor.Tensor, id uint64) bool {
	switch d := t.Data.(type) {
	case []int64:
		d[0] = int64(id)
		return id <= math.MaxInt64
	case []int32:
		d[0] = int32(id)
		return id <= math.MaxInt32
	case []int16:
		d[0] = int16(id)
		return id <= math.MaxInt16
	case []int8:
		d[0] = int8(id)
		return id <= math.MaxInt8
	}
	return false
}
