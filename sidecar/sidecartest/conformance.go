package sidecartest

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// Fixtures are the two models RunConformance registers: one FLOAT input of
// shape [-1,3] and one FLOAT output, y = 2x+1 (AffineV1) and y = 3x-1
// (AffineV2), in the runtime's own format.
type Fixtures struct {
	AffineV1, AffineV2 runtimes.Files
	// BadUTF8 (optional) is a model this runtime fails to load with a
	// message that quotes bytes of the file which are not UTF-8 (an ONNX op
	// type of invalid UTF-8, say): registering it must still give
	// MODEL_EXECUTION with a valid UTF-8 message.
	BadUTF8 runtimes.Files
}

// waitLimit bounds every wait of the suite, so that a runtime that hangs
// fails the test instead of stalling it. It is not a performance assertion.
const waitLimit = 2 * time.Minute

// RunConformance is the runtime conformance suite's second part, the runtime
// behind a real sidecar: it opens a runtime with open, serves it with an
// in-process sidecar.Server on a Unix socket in a temporary directory and
// checks, over the real socket through sidecar.Client (open registers the
// runtime's Close with t.Cleanup, as for conformance.Run): an unknown model is
// MODEL_NOT_FOUND; AffineV1 registers (with a warm-up) and answers on the
// JSON and the typed path; re-registering AffineV2 while 32 goroutines
// predict gives every caller a correct v1 or v2 answer and never
// MODEL_NOT_FOUND; a failing warm-up rejects a registration and leaves the
// old model serving; a deleted model is MODEL_NOT_FOUND.
//
// As in runtimes/conformance, a positional runtime may report a wrong dtype
// or shape as MODEL_EXECUTION, and a warm-up naming an unknown input is not
// a fault for it (names are ignored).
func RunConformance(t *testing.T, open func(t *testing.T) *runtimes.Runtime, fx Fixtures) {
	t.Helper()
	if len(fx.AffineV1) == 0 || len(fx.AffineV2) == 0 {
		t.Fatal("sidecartest: RunConformance needs AffineV1 and AffineV2")
	}
	rt := open(t)

	// The input name comes from the model itself (positional runtimes
	// ignore it).
	probe, err := rt.Load(context.Background(), "sidecartest/probe/", copyFiles(fx.AffineV1))
	if err != nil {
		t.Fatalf("load AffineV1: %v", err)
	}
	inputName := "x"
	if ins := probe.Signature().Inputs; len(ins) > 0 && ins[0].Name != "" {
		inputName = ins[0].Name
	}
	positional := probe.Signature().Positional
	probe.Close()

	client := Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.NewTextHandler(testLogWriter{t}, nil))}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	sc := &sidecarSuite{client: client, input: inputName, positional: positional, fx: fx}
	t.Run("UnknownModel", func(t *testing.T) { sc.testUnknown(ctx, t) })
	t.Run("RegisterAndPredict", func(t *testing.T) { sc.testRegister(ctx, t) })
	t.Run("SwapWhilePredicting", func(t *testing.T) { sc.testSwap(ctx, t) })
	t.Run("WarmUpFailureKeepsOldModel", func(t *testing.T) { sc.testWarmUpFailure(ctx, t) })
	t.Run("Delete", func(t *testing.T) { sc.testDelete(ctx, t) })
	t.Run("CorruptModel", func(t *testing.T) { sc.testCorrupt(ctx, t) })
}

const sidecarModel = "conformance/sidecar_affine/"

type sidecarSuite struct {
	client *sidecar.Client
	input  string
	// positional runtimes ignore input names and may only find a wrong
	// dtype or shape when the model runs (MODEL_EXECUTION), as in Run.
	positional bool
	fx         Fixtures
}

// wantInputFault checks the error of an input that does not fit the model:
// INPUT_PARSING, or MODEL_EXECUTION from a positional runtime.
func (sc *sidecarSuite) wantInputFault(t *testing.T, what string, err error) {
	t.Helper()
	if sc.positional && inferr.TypeOf(err) == inferr.ModelExecution {
		return
	}
	scWantType(t, what, err, inferr.InputParsing)
}

// affineInput is a [rows,3] input whose values differ per row and call.
func scAffineInput(rows, salt int) []float32 {
	x := make([]float32, rows*3)
	for i := range x {
		x[i] = float32((i+salt)%17)/4 - 2
	}
	return x
}

// affineVersion tells which affine model produced y from x: 1, 2, or 0
// when y matches neither (all elements must agree).
func scAffineVersion(x []float32, y []float32) int {
	if len(x) != len(y) {
		return 0
	}
	match := func(a, b float32) bool {
		for i := range x {
			want := a*x[i] + b
			if math.Abs(float64(y[i]-want)) > 1e-5*(1+math.Abs(float64(want))) {
				return false
			}
		}
		return true
	}
	switch {
	case match(2, 1):
		return 1
	case match(3, -1):
		return 2
	}
	return 0
}

func scBatchJSON(path, input string, rows int, x []float32) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":%q,"data_type":"FLOAT","tensor_shape":[%d,3],"tensor_content":[`, path, input, rows)
	for i, v := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%v"`, v)
	}
	b.WriteString(`]}]}]}`)
	return []byte(b.String())
}

func (sc *sidecarSuite) entry(path string, rows int, x []float32) batch.Entry {
	return batch.Entry{ModelPath: path, Tensors: []tensor.Tensor{tensor.New(sc.input, []int64{int64(rows), 3}, x)}}
}

// predictTyped runs one typed call and returns the output or the entry's error.
func (sc *sidecarSuite) predictTyped(ctx context.Context, path string, rows int, x []float32) ([]float32, error) {
	res, err := sc.client.Predict(ctx, []batch.Entry{sc.entry(path, rows, x)})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("%d results for 1 entry", len(res))
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return scFloatOutput(res[0])
}

// predictJSON runs one JSON call and returns the output or the entry's error.
func (sc *sidecarSuite) predictJSON(ctx context.Context, path string, rows int, x []float32) ([]float32, error) {
	out, err := sc.client.PredictJSON(ctx, scBatchJSON(path, sc.input, rows, x))
	if err != nil {
		return nil, err
	}
	res, err := batch.ParseResponse(out)
	if err != nil {
		return nil, fmt.Errorf("response %s: %w", out, err)
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("%d results for 1 entry: %s", len(res), out)
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return scFloatOutput(res[0])
}

func scFloatOutput(r batch.Result) ([]float32, error) {
	if len(r.Tensors) != 1 {
		return nil, fmt.Errorf("model %q: %d outputs, want 1", r.ModelPath, len(r.Tensors))
	}
	switch d := r.Tensors[0].Data.(type) {
	case []float32:
		return d, nil
	case []float64: // the JSON response carries numbers; FLOAT was widened
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = float32(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("model %q: output is %s, want FLOAT", r.ModelPath, r.Tensors[0].DType())
}

func scWantType(t *testing.T, what string, err error, want inferr.Type) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, want)
		return
	}
	if got := inferr.TypeOf(err); got != want {
		t.Errorf("%s: error type %s (%v), want %s", what, got, err, want)
	}
}

func (sc *sidecarSuite) testUnknown(ctx context.Context, t *testing.T) {
	const path = "conformance/never_registered/"
	_, err := sc.predictTyped(ctx, path, 1, scAffineInput(1, 0))
	scWantType(t, "typed predict of an unknown model", err, inferr.ModelNotFound)
	if err != nil && !strings.Contains(err.Error(), path) {
		t.Errorf("typed predict of an unknown model: %q does not name the path %q", err, path)
	}
	_, err = sc.predictJSON(ctx, path, 1, scAffineInput(1, 0))
	scWantType(t, "JSON predict of an unknown model", err, inferr.ModelNotFound)
	scWantType(t, "delete of an unknown model", sc.client.DeleteModel(ctx, path), inferr.ModelNotFound)
}

func (sc *sidecarSuite) register(ctx context.Context, files runtimes.Files, warmUp string) error {
	return sc.client.RegisterModel(ctx, sidecarModel, copyFiles(files), warmUp)
}

func (sc *sidecarSuite) testRegister(ctx context.Context, t *testing.T) {
	warm := string(scBatchJSON(sidecarModel, sc.input, 2, scAffineInput(2, 1)))
	if err := sc.register(ctx, sc.fx.AffineV1, warm); err != nil {
		t.Fatalf("register AffineV1: %v", err)
	}
	paths, err := sc.client.ModelPaths(ctx)
	if err != nil || len(paths) != 1 || paths[0] != sidecarModel {
		t.Fatalf("ModelPaths = %q, %v; want [%q]", paths, err, sidecarModel)
	}
	for _, rows := range []int{1, 64} {
		x := scAffineInput(rows, rows)
		y, err := sc.predictTyped(ctx, sidecarModel, rows, x)
		if err != nil {
			t.Fatalf("typed predict, %d rows: %v", rows, err)
		}
		if v := scAffineVersion(x, y); v != 1 {
			t.Errorf("typed predict, %d rows: y = %v for x = %v, not 2x+1", rows, y, x)
		}
		y, err = sc.predictJSON(ctx, sidecarModel, rows, x)
		if err != nil {
			t.Fatalf("JSON predict, %d rows: %v", rows, err)
		}
		if v := scAffineVersion(x, y); v != 1 {
			t.Errorf("JSON predict, %d rows: y = %v for x = %v, not 2x+1", rows, y, x)
		}
	}
	// A bad input is the entry's INPUT_PARSING error, not a failed call.
	bad := batch.Entry{ModelPath: sidecarModel, Tensors: []tensor.Tensor{tensor.New(sc.input, []int64{1, 3}, []int64{1, 2, 3})}}
	res, err := sc.client.Predict(ctx, []batch.Entry{bad, sc.entry(sidecarModel, 1, scAffineInput(1, 0))})
	if err != nil {
		t.Fatalf("typed predict with one bad entry: %v", err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results for 2 entries", len(res))
	}
	sc.wantInputFault(t, "INT64 input to a FLOAT model", res[0].Err)
	if res[1].Err != nil {
		t.Errorf("the good entry next to a bad one failed: %v", res[1].Err)
	}
}

func (sc *sidecarSuite) testSwap(ctx context.Context, t *testing.T) {
	const workers = 32
	var (
		stop       atomic.Bool
		swapped    atomic.Bool
		sawV1      atomic.Int64
		sawV2      atomic.Int64
		afterSwap  atomic.Int64
		wg         sync.WaitGroup
		failOnce   sync.Once
		firstError error
	)
	fail := func(err error) {
		failOnce.Do(func() { firstError = err })
		stop.Store(true)
	}
	for w := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				rows := 1 + (w+i)%4
				x := scAffineInput(rows, w*1000+i)
				var y []float32
				var err error
				if (w+i)%2 == 0 {
					y, err = sc.predictTyped(ctx, sidecarModel, rows, x)
				} else {
					y, err = sc.predictJSON(ctx, sidecarModel, rows, x)
				}
				if err != nil {
					fail(fmt.Errorf("worker %d call %d during the swap: %w", w, i, err))
					return
				}
				switch scAffineVersion(x, y) {
				case 1:
					sawV1.Add(1)
				case 2:
					sawV2.Add(1)
				default:
					fail(fmt.Errorf("worker %d call %d: y = %v for x = %v is neither 2x+1 nor 3x-1", w, i, y, x))
					return
				}
				if swapped.Load() && afterSwap.Add(1) > 10*workers {
					stop.Store(true)
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond) // let the workers get going on v1
	if err := sc.register(ctx, sc.fx.AffineV2, ""); err != nil {
		fail(fmt.Errorf("register AffineV2: %w", err))
	}
	swapped.Store(true)
	wg.Wait()
	if firstError != nil {
		t.Fatal(firstError)
	}
	if sawV2.Load() == 0 {
		t.Errorf("no caller saw AffineV2 after the swap (%d v1 answers)", sawV1.Load())
	}
	x := scAffineInput(3, 7)
	if y, err := sc.predictTyped(ctx, sidecarModel, 3, x); err != nil || scAffineVersion(x, y) != 2 {
		t.Errorf("after the swap: y = %v, %v; want 3x-1 of %v", y, err, x)
	}
}

func (sc *sidecarSuite) testWarmUpFailure(ctx context.Context, t *testing.T) {
	// AffineV2 serves; a registration whose warm-up names an input the
	// model lacks must fail with the warm-up's type and change nothing.
	if !sc.positional { // positional runtimes ignore names
		badName := string(scBatchJSON(sidecarModel, "no_such_input_tensor", 1, scAffineInput(1, 0)))
		scWantType(t, "registration with a warm-up naming an unknown input", sc.register(ctx, sc.fx.AffineV1, badName), inferr.InputParsing)
	}
	badShape := strings.Replace(string(scBatchJSON(sidecarModel, sc.input, 1, scAffineInput(1, 0))), `[1,3]`, `[3,1]`, 1)
	sc.wantInputFault(t, "registration with a warm-up of the wrong shape", sc.register(ctx, sc.fx.AffineV1, badShape))
	scWantType(t, "registration with a warm-up that is not JSON", sc.register(ctx, sc.fx.AffineV1, "{not json"), inferr.InputParsing)
	x := scAffineInput(2, 3)
	if y, err := sc.predictTyped(ctx, sidecarModel, 2, x); err != nil || scAffineVersion(x, y) != 2 {
		t.Errorf("after failed registrations: y = %v, %v; want AffineV2's 3x-1 of %v", y, err, x)
	}
	corrupt := runtimes.Files{}
	for name, b := range sc.fx.AffineV1 {
		corrupt[name] = b[:len(b)/2]
	}
	scWantType(t, "registration of a truncated model", sc.register(ctx, corrupt, ""), inferr.ModelExecution)
	if y, err := sc.predictTyped(ctx, sidecarModel, 2, x); err != nil || scAffineVersion(x, y) != 2 {
		t.Errorf("after a corrupt registration: y = %v, %v; want AffineV2's 3x-1 of %v", y, err, x)
	}
}

func (sc *sidecarSuite) testDelete(ctx context.Context, t *testing.T) {
	if err := sc.client.DeleteModel(ctx, sidecarModel); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err := sc.predictTyped(ctx, sidecarModel, 1, scAffineInput(1, 0))
	scWantType(t, "typed predict after delete", err, inferr.ModelNotFound)
	_, err = sc.predictJSON(ctx, sidecarModel, 1, scAffineInput(1, 0))
	scWantType(t, "JSON predict after delete", err, inferr.ModelNotFound)
	scWantType(t, "second delete", sc.client.DeleteModel(ctx, sidecarModel), inferr.ModelNotFound)
	if paths, err := sc.client.ModelPaths(ctx); err != nil || len(paths) != 0 {
		t.Errorf("ModelPaths after delete = %q, %v; want []", paths, err)
	}
}

// testCorrupt registers damaged models through the sidecar: every one
// fails as MODEL_EXECUTION (never a transport error such as gRPC's
// Internal) with a valid UTF-8 message that names the model path.
func (sc *sidecarSuite) testCorrupt(ctx context.Context, t *testing.T) {
	damage := map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"garbage": func(b []byte) []byte {
			g := make([]byte, max(len(b), 64))
			x := uint64(0x9E3779B97F4A7C15)
			for i := range g {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				g[i] = byte(x) | 0x80 // never a valid UTF-8 text
			}
			return g
		},
		"text with invalid UTF-8": func([]byte) []byte { return []byte("not a model \xff\xfe\xc3\x28 at all\n") },
	}
	models := map[string]runtimes.Files{}
	for what, f := range damage {
		files := runtimes.Files{}
		for name, b := range sc.fx.AffineV1 {
			files[name] = f(append([]byte(nil), b...))
		}
		models[what] = files
	}
	if sc.fx.BadUTF8 != nil {
		models["BadUTF8 fixture"] = sc.fx.BadUTF8
	}
	for what, files := range models {
		path := "conformance/corrupt/" + strings.ReplaceAll(what, " ", "_") + "/"
		err := sc.client.RegisterModel(ctx, path, copyFiles(files), "")
		scWantType(t, "registration of a "+what+" model", err, inferr.ModelExecution)
		if err == nil {
			continue
		}
		if msg := err.Error(); !utf8.ValidString(msg) || !strings.Contains(msg, path) {
			t.Errorf("registration of a %s model: the message is not valid UTF-8 or does not name %q: %q", what, path, msg)
		}
		t.Logf("%s: %v", what, err)
	}
}

// testLogWriter sends the server's log lines to t.Log (shown with -v or on
// failure).
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// copyFiles gives the runtime a private copy of a fixture's bytes, so that
// a runtime that keeps or modifies them cannot affect another test.
func copyFiles(files runtimes.Files) runtimes.Files {
	c := make(runtimes.Files, len(files))
	for name, b := range files {
		c[name] = append([]byte(nil), b...)
	}
	return c
}
