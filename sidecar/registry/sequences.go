package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
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
	// SequenceClientName is an input only bidding-server's KServe front
	// adds (and refuses from its clients): BYTES [1], the client a start
	// counts against (sequence.Options.MaxPerClient), its remote host.
	SequenceClientName = "sequence_client"
)

// startSequences gives e (its model m) a sequence manager when its
// settings make it stateful (before e is published): the registration's own settings (its
// model_metadata entry) when it carries them, else the runtime config's
// stateful_models entry for path. The entry wins because it is per model.
// A model that cannot keep one state per sequence is refused, naming the
// setting.
func (r *Registry) startSequences(path string, e *entry, own *runtimes.SequenceSettings) error {
	m := e.model
	set, ok := r.settings.StatefulModels[path]
	field := fmt.Sprintf("runtime config stateful_models[%q].stateful", path)
	if own != nil {
		set, ok = *own, true
		field = "the registration's (model_metadata entry's) stateful"
	}
	if !ok || !set.Stateful {
		return nil
	}
	if !m.SupportsSequences() {
		return inferr.Errorf(inferr.InputParsing, "register model %s: %s is true, but the %s runtime keeps no per-sequence state", inferr.Quote(path), field, r.rt.Name())
	}
	if !m.Stateful() {
		return inferr.Errorf(inferr.InputParsing, "register model %s: %s is true, but the model has no state (a TensorFlow model assigns no variables; an ONNX model has no <name>_in input fed back from a <name>_out output; a PyTorch model has no forward() argument <name>_in or no initial_state())", inferr.Quote(path), field)
	}
	// A state the runtime cannot make (an ONNX state of dynamic shape) is
	// refused now, not at every sequence start.
	if _, err := m.NewSequenceState(); err != nil {
		return inferr.Errorf(inferr.InputParsing, "register model %s: %s is true, but a sequence cannot start: %w", inferr.Quote(path), field, err)
	}
	opts := sequence.Options{Name: path}
	if set.MaxSequenceNumber != nil {
		opts.MaxSequences = int(*set.MaxSequenceNumber)
	}
	opts.NoIdleCleanup = set.IdleSequenceCleanup != nil && !*set.IdleSequenceCleanup
	opts.MaxPerClient = r.maxPerClient
	opts.IdleAfter = r.idleAfter
	e.sequences = sequence.NewManager(opts, m.NewSequenceState)
	return nil
}

// shareState applies the runtime config's shared_state_models opt-out to
// e's model, before its warm-up and before it is published: its calls then share one
// state, as in B&A, instead of each starting from the state after load. A
// model the opt-out cannot apply to is refused, naming the setting: one
// the registration serves with sequences, one without state, one of a
// runtime with no shared state.
func (r *Registry) shareState(path string, e *entry, own *runtimes.SequenceSettings) error {
	i := slices.Index(r.settings.SharedStateModels, path)
	if i < 0 {
		return nil
	}
	field := fmt.Sprintf("runtime config shared_state_models[%d]", i)
	if own != nil && own.Stateful {
		return inferr.Errorf(inferr.InputParsing, "register model %s: %s lists it, but the registration's (model_metadata entry's) stateful serves it with sequences: its calls share one state or keep one per sequence, not both", inferr.Quote(path), field)
	}
	if err := e.model.ShareState(); err != nil {
		return inferr.Errorf(inferr.InputParsing, "register model %s: %s lists it, but the %s runtime cannot share its state: %w", inferr.Quote(path), field, r.rt.Name(), err)
	}
	r.log.Warn("model serves every call on one shared state (shared_state_models): what a call assigns, later calls of any client see",
		"model_path", path, "model_reset_probability", r.rt.Config().ModelResetProbability)
	return nil
}

// stopSequences drops e's sequences (e was replaced, deleted or never
// published): a reload starts with none.
func (r *Registry) stopSequences(e *entry) {
	if e.sequences != nil {
		e.sequences.Close()
	}
}

// SweepSequences removes the idle sequences of every published model now,
// as the cleaner does every interval, and returns how many it removed.
func (r *Registry) SweepSequences() int {
	n := 0
	cur := *r.entries.Load()
	for _, path := range slices.Sorted(maps.Keys(cur)) {
		if mgr := cur[path].sequences; mgr != nil {
			if k := mgr.Sweep(); k > 0 {
				r.log.Info("removed idle sequences", "model_path", path, "sequences", k)
				n += k
			}
		}
	}
	return n
}

// runSequenceCleaner sweeps every interval until stop is closed.
func (r *Registry) runSequenceCleaner(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.SweepSequences()
		}
	}
}

// callSequence runs a request of a stateful model with sequences: the
// special inputs are taken out, the rest runs on the sequence's state, and
// sequence_id is appended to the outputs in the form it came in (INT64 [1]
// when it was absent). Sequence errors keep OpenVINO Model Server's
// messages and their class (a *sequence.Error, sent as Error.sequence_class)
// under the closest of the six types: INVALID_ARGUMENT is INPUT_PARSING, NOT_FOUND
// MODEL_NOT_FOUND, the others MODEL_EXECUTION.
// queued is how long the request waited for its sequence (behind the
// sequence's previous request) before its model call started.
func (r *Registry) callSequence(ctx context.Context, m *runtimes.Model, mgr *sequence.Manager, inputs []tensor.Tensor) (_ []tensor.Tensor, queued time.Duration, _ error) {
	path := m.Path()
	id, ctl, idIn, rest, err := sequenceInputs(path, inputs)
	if err != nil {
		return nil, 0, err
	}
	if client, ok := takeClient(&rest); ok {
		ctx = sequence.WithClient(ctx, client)
	}
	var out []tensor.Tensor
	start := time.Now()
	id, err = mgr.Run(ctx, id, ctl, func(st any) error {
		queued = time.Since(start)
		var err error
		out, err = m.PredictSequence(ctx, st, rest)
		return err
	})
	if errors.Is(err, sequence.ErrClosed) {
		// The model was replaced or deleted: predict retries on the new one.
		return nil, queued, inferr.Wrap(inferr.ModelNotFound, err, "model "+inferr.Quote(path))
	}
	if err != nil {
		return nil, queued, typeSequenceError(err)
	}
	idOut := tensor.New(SequenceIDName, []int64{1}, []int64{int64(id)})
	if idIn != nil {
		same := tensor.Tensor{Name: SequenceIDName, Shape: slices.Clone(idIn.Shape), Data: tensor.MakeData(idIn.DType(), idIn.Len())}
		if setInteger(same, id) {
			idOut = same
		}
	}
	return append(out, idOut), queued, nil
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

// takeClient removes the sequence_client input from inputs, returning its
// value when it is one BYTES element.
func takeClient(inputs *[]tensor.Tensor) (string, bool) {
	i := slices.IndexFunc(*inputs, func(t tensor.Tensor) bool { return t.Name == SequenceClientName })
	if i < 0 {
		return "", false
	}
	in := (*inputs)[i]
	*inputs = slices.Delete(*inputs, i, i+1)
	if b, ok := in.Data.([][]byte); ok && len(b) == 1 {
		return string(b[0]), true
	}
	return "", false
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
		v, neg, err := oneInteger(in)
		if err != nil {
			return 0, 0, nil, nil, inferr.Errorf(inferr.InputParsing, "model %s: input %s: %w", inferr.Quote(path), in.Name, err)
		}
		if in.Name == SequenceIDName {
			if neg {
				return 0, 0, nil, nil, inferr.Errorf(inferr.InputParsing, "model %s: input %s is %d, want a uint64 (0 for none)", inferr.Quote(path), in.Name, int64(v))
			}
			id, idIn = v, in
			continue
		}
		if neg || v > math.MaxUint32 {
			shown := strconv.FormatUint(v, 10)
			if neg {
				shown = strconv.FormatInt(int64(v), 10)
			}
			msg := fmt.Sprintf("model %s: input %s is %s, want 0 (none), 1 (start) or 2 (end): %s", inferr.Quote(path), in.Name, shown, sequence.MsgBadControlValue)
			return 0, 0, nil, nil, inferr.Wrap(inferr.InputParsing, &sequence.Error{Code: sequence.InvalidArgument, Msg: msg}, "")
		}
		ctl = sequence.Control(v)
	}
	return id, ctl, idIn, rest, nil
}

// oneInteger reads the value of an integer tensor of one element, signed
// (INT8 to INT64) or unsigned (UINT8 to UINT64: the seed's sequence_id is a
// UINT64, so ids above 2^63-1 come this way). neg reports a negative
// signed value, whose bits v then holds.
func oneInteger(t *tensor.Tensor) (v uint64, neg bool, err error) {
	if t.Len() != 1 || len(t.Shape) > 1 {
		return 0, false, fmt.Errorf("shape %v, want [1] (one value)", t.Shape)
	}
	signed := func(n int64) (uint64, bool, error) { return uint64(n), n < 0, nil }
	switch d := t.Data.(type) {
	case []int64:
		return signed(d[0])
	case []int32:
		return signed(int64(d[0]))
	case []int16:
		return signed(int64(d[0]))
	case []int8:
		return signed(int64(d[0]))
	case []uint64:
		return d[0], false, nil
	case []uint32:
		return uint64(d[0]), false, nil
	case []uint16:
		return uint64(d[0]), false, nil
	case []uint8:
		return uint64(d[0]), false, nil
	}
	return 0, false, fmt.Errorf("dtype %v, want an integer", t.DType())
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
	case []uint64:
		d[0] = id
		return true
	case []uint32:
		d[0] = uint32(id)
		return id <= math.MaxUint32
	case []uint16:
		d[0] = uint16(id)
		return id <= math.MaxUint16
	case []uint8:
		d[0] = uint8(id)
		return id <= math.MaxUint8
	}
	return false
}
