//go:build pytorch && cgo

package pytorch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// sidecarBinary builds cmd/inference-sidecar-pytorch with the pytorch tag,
// once per test process.
func sidecarBinary(t testing.TB) string {
	t.Helper()
	return testhelp.BuildBinary(t, "cmd/inference-sidecar-pytorch", true, "-tags", "pytorch")
}

// startSidecar runs the pytorch sidecar binary under a supervisor on a
// socket in a short private directory.
func startSidecar(t testing.TB) *sidecar.Supervisor {
	t.Helper()
	return startSidecarWith(t, `{"num_intraop_threads":1,"num_interop_threads":1,"module_name":"pytorch"}`)
}

// startSidecarWith is startSidecar with the runtime config runtimeConfig.
func startSidecarWith(t testing.TB, runtimeConfig string) *sidecar.Supervisor {
	t.Helper()
	bin := sidecarBinary(t)
	dir, err := os.MkdirTemp("", "pts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath:    bin,
		RuntimeConfig: runtimeConfig,
		SocketPath:    filepath.Join(dir, "s.sock"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return sup
}

func affineJSON(path string, x []float32) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":"ignored","data_type":"FLOAT","tensor_shape":[%d,3],"tensor_content":[`, path, len(x)/3)
	for i, v := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%v"`, v)
	}
	b.WriteString(`]}]}]}`)
	return b.String()
}

// The real sidecar serves sequences of running_sum.pt: interleaved
// sequences keep their own sums (start, middle, end), and a model without
// the state convention is refused when listed as stateful.
func TestSequencesOverSocket(t *testing.T) {
	sup := startSidecarWith(t, `{"num_intraop_threads":1,"num_interop_threads":1,"module_name":"pytorch","stateful_models":{"sum/":{"stateful":true},"affine/":{"stateful":true}}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sup.RegisterModel(ctx, "sum/", readTestdata(t, "running_sum.pt"), ""); err != nil {
		t.Fatal(err)
	}
	call := func(x float32, id int64, ctl int32) (float32, int64) {
		t.Helper()
		ts := []tensor.Tensor{tensor.New("x", []int64{1}, []float32{x}), tensor.New(sidecar.SequenceIDName, []int64{1}, []int64{id})}
		if ctl >= 0 {
			ts = append(ts, tensor.New(sidecar.SequenceControlName, []int64{1}, []int32{ctl}))
		}
		res, err := sup.Client().Predict(ctx, []batch.Entry{{ModelPath: "sum/", Tensors: ts}})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.Err != nil || len(r.Tensors) != 2 || r.Tensors[1].Name != sidecar.SequenceIDName {
			t.Fatalf("sequence %d +%v: %+v, want the sum and sequence_id (the state hidden)", id, x, r)
		}
		return r.Tensors[0].Data.([]float32)[0], r.Tensors[1].Data.([]int64)[0]
	}
	_, a := call(1, 0, 1)
	if a <= 0 {
		t.Fatalf("assigned id %d", a)
	}
	call(100, 9, 1)
	for i, s := range []struct {
		x    float32
		id   int64
		ctl  int32
		want float32
	}{{2, a, -1, 3}, {200, 9, 0, 300}, {3, a, 2, 6}, {300, 9, 2, 600}} {
		if sum, id := call(s.x, s.id, s.ctl); sum != s.want || id != s.id {
			t.Fatalf("step %d: sum %v id %d, want %v and %d", i, sum, id, s.want, s.id)
		}
	}
	if sum, _ := call(5, 9, 1); sum != 5 {
		t.Fatalf("restart of 9: sum %v, want 5", sum)
	}

	err := sup.RegisterModel(ctx, "affine/", readTestdata(t, "affine_v1.pt"), "")
	if err == nil || !strings.Contains(err.Error(), `stateful_models["affine/"].stateful`) || !strings.Contains(err.Error(), "no state") {
		t.Fatalf("registering affine_v1.pt as stateful: %v, want an error naming stateful_models[\"affine/\"].stateful", err)
	}
	if inferr.TypeOf(err) != inferr.InputParsing {
		t.Errorf("error type %v, want INPUT_PARSING", inferr.TypeOf(err))
	}
}

func TestSidecarOverSocket(t *testing.T) {
	sup := startSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sup.Client()

	x := []float32{1, 2, 3, -0.5, 0, 10}
	if err := sup.RegisterModel(ctx, "affine/", readTestdata(t, "affine_v1.pt"), affineJSON("affine/", x[:3])); err != nil {
		t.Fatal(err)
	}
	out, err := c.PredictJSON(ctx, []byte(affineJSON("affine/", x)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := batch.ParseResponse(out)
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Tensors) != 1 {
		t.Fatalf("response %s: %v %+v", out, err, res)
	}
	got := res[0].Tensors[0]
	y, _ := tensor.Data[float32](got)
	if got.Name != "0" || fmt.Sprint(got.Shape) != "[2 3]" || len(y) != 6 {
		t.Fatalf("output %+v, want \"0\" FLOAT [2,3]; response %s", got, out)
	}
	for i := range x {
		if want := 2*x[i] + 1; y[i] != want {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want)
		}
	}

	// Rejected models never become visible, and the error says why.
	err = sup.RegisterModel(ctx, "stateful/", readTestdata(t, "stateful.pt"), "")
	if err == nil || !strings.Contains(err.Error(), "stateful") {
		t.Errorf("registering a stateful model: %v, want an error naming the reason", err)
	}
	err = sup.RegisterModel(ctx, "print/", readTestdata(t, "side_effect_print.pt"), "")
	if err == nil || !strings.Contains(err.Error(), "prim::Print") {
		t.Errorf("registering a printing model: %v", err)
	}
	// A bad warm-up fails the registration too (the model raises on a 1-D input).
	err = sup.RegisterModel(ctx, "badwarmup/", readTestdata(t, "affine_v2.pt"),
		`{"request":[{"model_path":"badwarmup/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[3],"tensor_content":["1","2","3"]}]}]}`)
	if err == nil {
		t.Errorf("registering with a failing warm-up succeeded")
	}
	paths, err := c.ModelPaths(ctx)
	if err != nil || !slices.Equal(paths, []string{"affine/"}) {
		t.Errorf("model paths %v (%v), want [affine/]", paths, err)
	}

	// An unsupported output is a per-entry OUTPUT_PARSING error; the other entry still runs.
	if err := sup.RegisterModel(ctx, "bool/", readTestdata(t, "bad_output_bool.pt"), ""); err != nil {
		t.Fatal(err)
	}
	req := `{"request":[` +
		`{"model_path":"bool/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]},` +
		strings.TrimSuffix(strings.TrimPrefix(affineJSON("affine/", x[:3]), `{"request":[`), `]}`) + `]}`
	out, err = c.PredictJSON(ctx, []byte(req))
	if err != nil {
		t.Fatal(err)
	}
	res, err = batch.ParseResponse(out)
	if err != nil || len(res) != 2 {
		t.Fatalf("response %s: %v", out, err)
	}
	if inferr.TypeOf(res[0].Err) != inferr.OutputParsing || !strings.Contains(res[0].Err.Error(), "BOOL") {
		t.Errorf("bool output: %v, want OUTPUT_PARSING naming BOOL; response %s", res[0].Err, out)
	}
	if res[1].Err != nil || len(res[1].Tensors) != 1 {
		t.Errorf("second entry: %+v; response %s", res[1], out)
	}
}

func TestSidecarReferenceE2E(t *testing.T) {
	dir := referenceDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "pytorch_e2e_model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	sup := startSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sup.RegisterModel(ctx, "e2e/", driver.Files{"model.pt": b}, ""); err != nil {
		t.Fatal(err)
	}
	req := `{"request":[{"model_path":"e2e/","tensors":[` +
		`{"tensor_name":"a","data_type":"INT64","tensor_shape":[1],"tensor_content":["8"]},` +
		`{"tensor_name":"b","data_type":"INT64","tensor_shape":[1],"tensor_content":["6"]},` +
		`{"tensor_name":"c","data_type":"INT64","tensor_shape":[1],"tensor_content":["18"]},` +
		`{"tensor_name":"d","data_type":"INT64","tensor_shape":[1],"tensor_content":["11"]},` +
		`{"tensor_name":"e","data_type":"INT64","tensor_shape":[1],"tensor_content":["9"]},` +
		`{"tensor_name":"f","data_type":"FLOAT","tensor_shape":[1,10],"tensor_content":["0.4313","0.3381","0.3103","0.3150","0.9595","0.7862","0.6386","0.9695","0.0469","0.5807"]},` +
		`{"tensor_name":"g","data_type":"FLOAT","tensor_shape":[1,10],"tensor_content":["0.8201","0.8321","0.1021","0.6779","0.2152","0.4805","0.3957","0.0825","0.0230","0.1711"]}]}]}`
	out, err := sup.Client().PredictJSON(ctx, []byte(req))
	if err != nil {
		t.Fatal(err)
	}
	res, err := batch.ParseResponse(out)
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	y, ok := tensor.Data[float32](res[0].Tensors[0])
	if !ok || len(y) != 1 || !closeRel(float64(y[0]), 0.4846605658531189, 1e-6) {
		t.Errorf("response %s, want 0.4846605658531189", out)
	}
}
