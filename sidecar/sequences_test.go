package sidecar

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/tensor"
)

func ptr[T any](v T) *T { return &v }

// startSequenceServer serves the TensorFlow runtime with sum/ configured as
// a stateful model (at most maxSeq sequences) on a real socket, and
// registers the running-sum model (checkpoint 0) there.
func startSequenceServer(t *testing.T, maxSeq uint32, cleanEvery time.Duration) (*Server, *Client, runtimes.Files) {
	t.Helper()
	settings := registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{
		"sum/": {Stateful: true, MaxSequenceNumber: ptr(maxSeq)},
	}}
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, c := serveOnSocket(t, ServerOptions{Runtime: rt, Settings: settings, SequenceCleanerInterval: cleanEvery})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterModel(ctx, "sum/", files, ""); err != nil {
		t.Fatal(err)
	}
	return srv, c, files
}

// seqEntry is a request for sum/ adding x; id and ctl < 0 leave the input
// out.
func seqEntry(x float32, id int64, ctl int32) batch.Entry {
	ts := []tensor.Tensor{tensor.New("x", []int64{1}, []float32{x})}
	if id >= 0 {
		ts = append(ts, tensor.New(SequenceIDName, []int64{1}, []int64{id}))
	}
	if ctl >= 0 {
		ts = append(ts, tensor.New(SequenceControlName, []int64{1}, []int32{ctl}))
	}
	return batch.Entry{ModelPath: "sum/", Tensors: ts}
}

func predictOne(t *testing.T, c *Client, e batch.Entry) batch.Result {
	t.Helper()
	res, err := c.Predict(context.Background(), []batch.Entry{e})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// sumAndID reads the running sum and the sequence_id output of a result.
func sumAndID(t *testing.T, r batch.Result) (float32, int64) {
	t.Helper()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	var sum float32
	id := int64(-1)
	for _, ts := range r.Tensors {
		if ts.Name == SequenceIDName {
			d, ok := tensor.Data[int64](ts)
			if !ok || len(d) != 1 || len(ts.Shape) != 1 || ts.Shape[0] != 1 {
				t.Fatalf("sequence_id output %+v, want INT64 [1]", ts)
			}
			id = d[0]
			continue
		}
		sum = ts.Data.([]float32)[0]
	}
	if id < 0 {
		t.Fatalf("no sequence_id output in %+v", r.Tensors)
	}
	return sum, id
}

func TestSequencesInterleavedKeepSeparateState(t *testing.T) {
	_, c, _ := startSequenceServer(t, 10, -1)
	sumA, a := sumAndID(t, predictOne(t, c, seqEntry(1, -1, 1))) // start, no id
	if a <= 0 || sumA != 1 {
		t.Fatalf("start without id: sum %v id %d, want 1 and an assigned id", sumA, a)
	}
	sumB, b := sumAndID(t, predictOne(t, c, seqEntry(100, 0, 1))) // start, id 0
	if b <= 0 || b == a || sumB != 100 {
		t.Fatalf("start with id 0: sum %v id %d, want 100 and an id other than %d", sumB, b, a)
	}
	sumC, cid := sumAndID(t, predictOne(t, c, seqEntry(1000, 77, 1))) // start, own id
	if cid != 77 || sumC != 1000 {
		t.Fatalf("start with id 77: sum %v id %d", sumC, cid)
	}
	steps := []struct {
		x    float32
		id   int64
		ctl  int32
		want float32
	}{{2, a, -1, 3}, {200, b, 0, 300}, {2000, 77, -1, 3000}, {3, a, 0, 6}, {300, b, 2, 600}, {3000, 77, 2, 6000}, {4, a, 2, 10}}
	for i, s := range steps {
		sum, id := sumAndID(t, predictOne(t, c, seqEntry(s.x, s.id, s.ctl)))
		if sum != s.want || id != s.id {
			t.Fatalf("step %d (sequence %d, +%v): sum %v id %d, want %v", i, s.id, s.x, sum, id, s.want)
		}
	}
	// Ended: the ids are free again and start from the checkpoint.
	if sum, id := sumAndID(t, predictOne(t, c, seqEntry(5, 77, 1))); sum != 5 || id != 77 {
		t.Fatalf("restart of 77: sum %v id %d, want 5 (no state left from before)", sum, id)
	}
}

// The sequence_id output takes the input's form (INT32 in, INT32 out).
func TestSequenceIDOutputKeepsTheInputsForm(t *testing.T) {
	_, c, _ := startSequenceServer(t, 10, -1)
	e := batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{1}, []float32{1}),
		tensor.New(SequenceIDName, []int64{1}, []int32{9}),
		tensor.New(SequenceControlName, []int64{1}, []int64{1}),
	}}
	r := predictOne(t, c, e)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	last := r.Tensors[len(r.Tensors)-1]
	if d, ok := tensor.Data[int32](last); last.Name != SequenceIDName || !ok || d[0] != 9 {
		t.Fatalf("sequence_id output %+v, want INT32 [9]", last)
	}
}

func wantSequenceError(t *testing.T, what string, r batch.Result, typ inferr.Type, code sequence.Code, msg string) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("%s: no error", what)
	}
	errType(t, what, r.Err, typ, msg, `"sum/"`)
	// The class comes over the wire in Error.sequence_class, not from the text.
	if got, ok := sequence.CodeOf(r.Err); !ok || got != code {
		t.Errorf("%s: %q has class %v, want %v", what, r.Err, got, code)
	}
}

func TestSequenceErrors(t *testing.T) {
	_, c, _ := startSequenceServer(t, 2, -1)
	sumAndID(t, predictOne(t, c, seqEntry(1, 5, 1)))
	wantSequenceError(t, "id in use on start", predictOne(t, c, seqEntry(1, 5, 1)), inferr.ModelExecution, sequence.AlreadyExists, sequence.MsgAlreadyExists)
	wantSequenceError(t, "unknown id", predictOne(t, c, seqEntry(1, 6, -1)), inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
	wantSequenceError(t, "unknown id on end", predictOne(t, c, seqEntry(1, 6, 2)), inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
	wantSequenceError(t, "no id mid-sequence", predictOne(t, c, seqEntry(1, -1, -1)), inferr.InputParsing, sequence.InvalidArgument, sequence.MsgNoID)
	wantSequenceError(t, "id 0 on end", predictOne(t, c, seqEntry(1, 0, 2)), inferr.InputParsing, sequence.InvalidArgument, sequence.MsgNoID)
	wantSequenceError(t, "control 3", predictOne(t, c, seqEntry(1, 5, 3)), inferr.InputParsing, sequence.InvalidArgument, sequence.MsgBadControlValue)
	wantSequenceError(t, "control -1", predictOne(t, c, batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{1}, []float32{1}), tensor.New(SequenceIDName, []int64{1}, []int64{5}),
		tensor.New(SequenceControlName, []int64{1}, []int32{-1})}}), inferr.InputParsing, sequence.InvalidArgument, sequence.MsgBadControlValue)
	errType(t, "negative id", predictOne(t, c, batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{1}, []float32{1}), tensor.New(SequenceIDName, []int64{1}, []int64{-5})}}).Err, inferr.InputParsing, "sequence_id is -5")
	errType(t, "two values", predictOne(t, c, batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{1}, []float32{1}), tensor.New(SequenceIDName, []int64{2}, []int64{5, 6})}}).Err, inferr.InputParsing, "sequence_id", "[2]")
	errType(t, "float id", predictOne(t, c, batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{1}, []float32{1}), tensor.New(SequenceIDName, []int64{1}, []float32{5})}}).Err, inferr.InputParsing, "sequence_id", "integer")
	// The limit: 5 and one more, then no third.
	sumAndID(t, predictOne(t, c, seqEntry(1, -1, 1)))
	wantSequenceError(t, "limit reached", predictOne(t, c, seqEntry(1, -1, 1)), inferr.ModelExecution, sequence.Unavailable, sequence.MsgLimit)
	// A failed request keeps the sequence usable.
	if sum, _ := sumAndID(t, predictOne(t, c, seqEntry(1, 5, 0))); sum != 2 {
		t.Fatalf("sequence 5 after the errors: sum %v, want 2", sum)
	}
}

// The idle sweep removes sequences without a request since the previous
// sweep; the cleaner runs it on its own every interval.
func TestSequenceIdleCleanup(t *testing.T) {
	srv, c, _ := startSequenceServer(t, 10, -1)
	sumAndID(t, predictOne(t, c, seqEntry(1, 1, 1)))
	sumAndID(t, predictOne(t, c, seqEntry(1, 2, 1)))
	if n := srv.SweepSequences(); n != 0 {
		t.Fatalf("first sweep removed %d sequences", n)
	}
	sumAndID(t, predictOne(t, c, seqEntry(1, 1, 0)))
	if n := srv.SweepSequences(); n != 1 {
		t.Fatalf("second sweep removed %d sequences, want 1 (sequence 2 idle)", n)
	}
	wantSequenceError(t, "swept sequence", predictOne(t, c, seqEntry(1, 2, 0)), inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
	if sum, _ := sumAndID(t, predictOne(t, c, seqEntry(1, 1, 0))); sum != 3 {
		t.Fatalf("sequence 1 after the sweep: sum %v, want 3", sum)
	}

	// The cleaner goroutine (a short interval instead of minutes).
	_, c2, _ := startSequenceServer(t, 10, 5*time.Millisecond)
	sumAndID(t, predictOne(t, c2, seqEntry(1, 3, 1)))
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for {
		r := predictOne(t, c2, seqEntry(0, 3, -1))
		if r.Err != nil {
			wantSequenceError(t, "cleaned sequence", r, inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleaner never removed the idle sequence")
		}
		time.Sleep(20 * time.Millisecond) // leave it idle across two sweeps
	}
}

// A model made stateful by its own registration (model_metadata's
// sequence settings), with no stateful_models in the runtime config, is
// swept by the cleaner too: idle sequences do not keep their state until
// the slots run out.
func TestSequenceCleanerForRegisteredSettings(t *testing.T) {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := serveOnSocket(t, ServerOptions{Runtime: rt, SequenceCleanerInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterModelWithSequences(ctx, "sum/", files, "", &runtimes.SequenceSettings{Stateful: true}); err != nil {
		t.Fatal(err)
	}
	sumAndID(t, predictOne(t, c, seqEntry(1, 3, 1)))
	deadline := time.Now().Add(30 * time.Second) // hang guard
	for {
		r := predictOne(t, c, seqEntry(0, 3, -1))
		if r.Err != nil {
			wantSequenceError(t, "cleaned sequence", r, inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleaner never removed the idle sequence of a model stateful by its registration")
		}
		time.Sleep(20 * time.Millisecond) // leave it idle across two sweeps
	}
}

// A reload (a new registration of the path) and a delete drop the model's
// sequences.
func TestSequenceReloadDropsSequences(t *testing.T) {
	_, c, files := startSequenceServer(t, 10, -1)
	sumAndID(t, predictOne(t, c, seqEntry(1, 1, 1)))
	if err := c.RegisterModel(context.Background(), "sum/", files, ""); err != nil {
		t.Fatal(err)
	}
	wantSequenceError(t, "after reload", predictOne(t, c, seqEntry(1, 1, 0)), inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
	if sum, id := sumAndID(t, predictOne(t, c, seqEntry(1, 1, 1))); sum != 1 || id != 1 {
		t.Fatalf("start after reload: sum %v id %d", sum, id)
	}
}

func TestStatefulSettingsRefused(t *testing.T) {
	for js, want := range map[string]string{
		`{"stateful_models": {"m/": {"max_sequence_number": 3}}}`:                         `stateful_models["m/"].max_sequence_number is set but stateful is not true`,
		`{"stateful_models": {"m/": {"stateful": false, "idle_sequence_cleanup": true}}}`: `stateful_models["m/"].idle_sequence_cleanup is set but stateful is not true`,
		`{"stateful_models": {"m/": {"low_latency_transformation": false}}}`:              `stateful_models["m/"].low_latency_transformation is set but stateful is not true`,
		`{"stateful_models": {"m/": {"stateful": true, "max_sequence_number": 0}}}`:       `max_sequence_number is 0`,
		`{"stateful_models": {"m/": {"stateful": true, "max_sequence_number": -1}}}`:      `max_sequence_number`,
		`{"stateful_models": {"m/": {"stateful": true, "sequence_timeout": 1}}}`:          `sequence_timeout`,
		`{"stateful_models": {"": {"stateful": true}}}`:                                   `model path is empty`,
		`{"sequence_cleaner_poll_wait_minutes": -1}`:                                      `sequence_cleaner_poll_wait_minutes`,
	} {
		_, err := ParseRuntimeConfig(js)
		if err == nil || !strings.Contains(err.Error(), want) || inferr.TypeOf(err) != inferr.InputParsing {
			t.Errorf("%s: %v, want INPUT_PARSING containing %q", js, err, want)
		}
	}
	cfg, err := ParseRuntimeConfig(`{"stateful_models": {"m/": {"stateful": true, "max_sequence_number": 7, "idle_sequence_cleanup": false, "low_latency_transformation": true}}, "sequence_cleaner_poll_wait_minutes": 0}`)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.StatefulModels["m/"]; !s.Stateful || *s.MaxSequenceNumber != 7 || *s.IdleSequenceCleanup || cfg.SequenceCleanerPollWait() != 0 {
		t.Fatalf("parsed %+v", cfg)
	}
	if d := (registry.Settings{}).SequenceCleanerPollWait(); d != 5*time.Minute {
		t.Fatalf("default poll wait %v, want 5m", d)
	}
}

// runInference's batch JSON carries the sequence fields as tensors; the
// answer has a sequence_id tensor, and an error entry its batch error type.
func TestSequencesInBatchJSON(t *testing.T) {
	_, c, _ := startSequenceServer(t, 10, -1)
	entry := func(x, id, ctl string) string {
		return `{"model_path":"sum/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["` + x + `"]},` +
			`{"tensor_name":"sequence_id","data_type":"INT64","tensor_shape":[1],"tensor_content":["` + id + `"]},` +
			`{"tensor_name":"sequence_control_input","data_type":"INT32","tensor_shape":[1],"tensor_content":["` + ctl + `"]}]}`
	}
	doc := `{"request":[` + entry("1", "7", "1") + `,` + entry("5", "8", "1") + `]}`
	out, err := c.PredictJSON(context.Background(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"tensor_name":"sequence_id","tensor_shape":[1],"data_type":"INT64","tensor_content":[7]`, `"tensor_content":[8]`} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("answer %s does not hold %s", out, want)
		}
	}
	doc = `{"request":[` + entry("2", "7", "2") + `,` + entry("1", "9", "0") + `]}`
	out, err = c.PredictJSON(context.Background(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := batch.ParseResponse(out)
	if err != nil {
		t.Fatal(err)
	}
	if sum, id := sumAndID(t, res[0]); sum != 3 || id != 7 {
		t.Fatalf("end of 7: sum %v id %d (%s)", sum, id, out)
	}
	wantSequenceError(t, "unknown id in a batch", res[1], inferr.ModelNotFound, sequence.NotFound, sequence.MsgNotFound)
}

// An assigned id reaches a script as runInference answers it (batch JSON,
// which JSON.parse reads into a float64), and the script's next request,
// built with JSON.stringify, names the same sequence: ids stay within
// 2^53-1. A 64-bit id would come back rounded and miss its sequence.
func TestAssignedSequenceIDSurvivesJavaScript(t *testing.T) {
	const n = 40
	_, c, _ := startSequenceServer(t, n, -1)
	vm := goja.New()
	// runInference as jsbridge answers it: Parse, Predict, AppendResponse.
	err := vm.Set("runInference", func(req string) string {
		entries, err := batch.ParseString(req, batch.Limits{})
		if err != nil {
			return string(batch.AppendBatchError(nil, err))
		}
		res, err := c.Predict(context.Background(), entries)
		if err != nil {
			return string(batch.AppendBatchError(nil, err))
		}
		out, err := batch.AppendResponse(nil, res)
		if err != nil {
			return string(batch.AppendBatchError(nil, err))
		}
		return string(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vm.RunString(`(function () {
		function call(x, id, ctl) {
			var r = JSON.parse(runInference(JSON.stringify({request: [{model_path: "sum/", tensors: [
				{tensor_name: "x", data_type: "FLOAT", tensor_shape: [1], tensor_content: [String(x)]},
				{tensor_name: "sequence_id", data_type: "INT64", tensor_shape: [1], tensor_content: [String(id)]},
				{tensor_name: "sequence_control_input", data_type: "INT32", tensor_shape: [1], tensor_content: [String(ctl)]}]}]}))).response[0];
			if (r.error) return {error: r.error.error_type + " " + r.error.description};
			var out = {};
			r.tensors.forEach(function (t) { out[t.tensor_name === "sequence_id" ? "id" : "sum"] = t.tensor_content[0]; });
			return out;
		}
		var ids = [], ends = [];
		for (var i = 0; i < ` + strconv.Itoa(n) + `; i++) ids.push(call(1, 0, 1).id);
		for (var i = 0; i < ids.length; i++) ends.push(call(i, ids[i], 2));
		return JSON.stringify({ids: ids.map(String), ends: ends});
	})()`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		IDs  []string
		Ends []struct {
			ID    float64
			Sum   float64
			Error string
		}
	}
	if err := json.Unmarshal([]byte(v.String()), &got); err != nil || len(got.IDs) != n || len(got.Ends) != n {
		t.Fatalf("the script returned %s (%v)", v, err)
	}
	high := 0
	for i, end := range got.Ends {
		id, err := strconv.ParseUint(got.IDs[i], 10, 64)
		if err != nil || id == 0 || id > sequence.MaxAssignedID {
			t.Fatalf("sequence %d: the script saw id %q", i, got.IDs[i])
		}
		if end.Error != "" || end.Sum != float64(1+i) || end.ID != float64(id) {
			t.Fatalf("sequence %d (id %d): the script's end got %+v, want sum %d", i, id, end, 1+i)
		}
		if id > 1<<52 {
			high++
		}
	}
	// Half the ids lie above 2^52, where a float64 has no bit to spare;
	// all 40 below it happen once in 2^40.
	if high == 0 {
		t.Fatalf("no assigned id above 2^52 in %v: ids are not drawn from 53 bits", got.IDs)
	}
}

// BenchmarkSequenceCall times one middle request of a sequence (the
// running-sum model, over the fast lane) against the same model's call
// without sequences (shared state), to show the cost of the sequence layer
// and the TensorFlow variable swap.
func BenchmarkSequenceCall(b *testing.B) {
	for _, mode := range []string{"shared", "sequence"} {
		b.Run(mode, func(b *testing.B) {
			var settings registry.Settings
			if mode == "sequence" {
				settings.StatefulModels = map[string]runtimes.SequenceSettings{"sum/": {Stateful: true}}
			}
			rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
			if err != nil {
				b.Fatal(err)
			}
			srv, err := NewServer(ServerOptions{Runtime: rt, Settings: settings, Logger: quietLog, SequenceCleanerInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			socket := testhelp.SocketPath(b, "s.sock")
			go srv.Serve(socket)
			defer srv.Stop()
			c, err := NewClient(socket, ClientOptions{Logger: quietLog})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if err := c.WaitHealthy(ctx); err != nil {
				b.Fatal(err)
			}
			files, _ := tfsave.RunningSumModel(tfsave.Options{}, 0)
			if err := c.RegisterModel(ctx, "sum/", files, ""); err != nil {
				b.Fatal(err)
			}
			e := seqEntry(1, -1, -1)
			if mode == "sequence" {
				if _, err := c.Predict(ctx, []batch.Entry{seqEntry(0, 1, 1)}); err != nil {
					b.Fatal(err)
				}
				e = seqEntry(1, 1, 0)
			}
			b.ResetTimer()
			for b.Loop() {
				res, err := c.Predict(ctx, []batch.Entry{e})
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
			}
		})
	}
}

// The seed's sequence_id is a UINT64: ids above 2^63-1 work and come back
// as UINT64; an unsigned control works too, and a UINT64 control above
// 2^32-1 is the seed's bad-control error.
func TestUnsignedSequenceFields(t *testing.T) {
	_, c, _ := startSequenceServer(t, 10, -1)
	const big = uint64(1)<<63 + 12345
	entry := func(x float32, id uint64, ctl uint32) batch.Entry {
		return batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
			tensor.New("x", []int64{1}, []float32{x}),
			tensor.New(SequenceIDName, []int64{1}, []uint64{id}),
			tensor.New(SequenceControlName, []int64{1}, []uint32{ctl}),
		}}
	}
	for i, s := range []struct {
		x    float32
		ctl  uint32
		want float32
	}{{1, 1, 1}, {2, 0, 3}, {4, 2, 7}} {
		r := predictOne(t, c, entry(s.x, big, s.ctl))
		if r.Err != nil {
			t.Fatalf("step %d: %v", i, r.Err)
		}
		last := r.Tensors[len(r.Tensors)-1]
		if d, ok := tensor.Data[uint64](last); last.Name != SequenceIDName || !ok || d[0] != big {
			t.Fatalf("step %d: sequence_id output %+v, want UINT64 [%d]", i, last, big)
		}
		if sum, _ := tensor.Data[float32](r.Tensors[0]); sum[0] != s.want {
			t.Fatalf("step %d: sum %v, want %v", i, sum[0], s.want)
		}
	}
	r := predictOne(t, c, batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{
		tensor.New("x", []int64{1}, []float32{1}),
		tensor.New(SequenceIDName, []int64{1}, []uint64{big}),
		tensor.New(SequenceControlName, []int64{1}, []uint64{1 << 32}),
	}})
	wantSequenceError(t, "control 2^32", r, inferr.InputParsing, sequence.InvalidArgument, sequence.MsgBadControlValue)
}

// serveSum serves the running-sum model at sum/ under the runtime config's
// settings, registered with the settings seq (nil: none).
func serveSum(t *testing.T, settings registry.Settings, seq *runtimes.SequenceSettings) (*Client, error) {
	t.Helper()
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := serveOnSocket(t, ServerOptions{Runtime: rt, Settings: settings, SequenceCleanerInterval: -1})
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c, c.RegisterModelWithSequences(ctx, "sum/", files, "", seq)
}

// A registration's own sequence settings (a model_metadata entry's) make
// a model stateful without the runtime config, and replace the runtime
// config's settings for the model: the entry wins, being per model.
func TestRegistrationSequenceSettings(t *testing.T) {
	t.Run("entry alone", func(t *testing.T) {
		c, err := serveSum(t, registry.Settings{}, &runtimes.SequenceSettings{Stateful: true, MaxSequenceNumber: ptr(uint32(1)), LowLatencyTransformation: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		sumAndID(t, predictOne(t, c, seqEntry(1, 3, 1)))
		wantSequenceError(t, "second sequence over the entry's limit 1", predictOne(t, c, seqEntry(1, 4, 1)), inferr.ModelExecution, sequence.Unavailable, sequence.MsgLimit)
	})
	t.Run("entry wins over the runtime config", func(t *testing.T) {
		cfg := registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{"sum/": {Stateful: true, MaxSequenceNumber: ptr(uint32(10))}}}
		c, err := serveSum(t, cfg, &runtimes.SequenceSettings{Stateful: true, MaxSequenceNumber: ptr(uint32(1))})
		if err != nil {
			t.Fatal(err)
		}
		sumAndID(t, predictOne(t, c, seqEntry(1, 3, 1)))
		wantSequenceError(t, "limit 1 from the entry, not 10", predictOne(t, c, seqEntry(1, 4, 1)), inferr.ModelExecution, sequence.Unavailable, sequence.MsgLimit)
	})
	t.Run("entry turns sequences off", func(t *testing.T) {
		cfg := registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{"sum/": {Stateful: true}}}
		c, err := serveSum(t, cfg, &runtimes.SequenceSettings{})
		if err != nil {
			t.Fatal(err)
		}
		// An ordinary model: no sequence inputs needed, and no call sees
		// another's sum.
		for i, want := range []float32{2, 2} {
			r := predictOne(t, c, batch.Entry{ModelPath: "sum/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1}, []float32{2})}})
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if d, _ := tensor.Data[float32](r.Tensors[0]); d[0] != want {
				t.Fatalf("call %d: sum %v, want %v (from the checkpoint's 0)", i, d[0], want)
			}
		}
	})
	for _, c := range []struct {
		what string
		seq  runtimes.SequenceSettings
		want string
	}{
		{"limit without stateful", runtimes.SequenceSettings{MaxSequenceNumber: ptr(uint32(3))}, "max_sequence_number is set but stateful is not true"},
		{"cleanup without stateful", runtimes.SequenceSettings{IdleSequenceCleanup: ptr(false)}, "idle_sequence_cleanup is set but stateful is not true"},
		{"limit 0", runtimes.SequenceSettings{Stateful: true, MaxSequenceNumber: ptr(uint32(0))}, "max_sequence_number is 0"},
	} {
		t.Run(c.what, func(t *testing.T) {
			_, err := serveSum(t, registry.Settings{}, &c.seq)
			errType(t, c.what, err, inferr.InputParsing, `"sum/"`, "sequence_settings", c.want)
		})
	}
}
