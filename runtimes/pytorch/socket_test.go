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

// PyTorch keeps no per-sequence state (doc.go says why): a model listed as
// stateful is refused at registration, naming the setting, and is never
// published.
func TestStatefulSequencesRefused(t *testing.T) {
	sup := startSidecarWith(t, `{"num_intraop_threads":1,"num_interop_threads":1,"module_name":"pytorch","stateful_models":{"affine/":{"stateful":true}}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := sup.RegisterModel(ctx, "affine/", readTestdata(t, "affine_v1.pt"), "")
	if err == nil || !strings.Contains(err.Error(), `stateful_models["affine/"].stateful`) || !strings.Contains(err.Error(), "per-sequence state") {
		t.Fatalf("registering a stateful PyTorch model: %v, want an error naming stateful_models[\"affine/\"].stateful", err)
	}
	if inferr.TypeOf(err) != inferr.InputParsing {
		t.Errorf("error type %v, want INPUT_PARSING", inferr.TypeOf(err))
	}
	out, err := sup.Client().PredictJSON(ctx, []byte(affineJSON("affine/", []float32{1, 2, 3})))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := batch.ParseResponse(out); err != nil || len(res) != 1 || res[0].Err == nil {
		t.Fatalf("the refused model answered %s (%v)", out, err)
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
	if inferr.TypeOf(res[0].Err) != inferr.OutputParsing || !strings.Contains(res[0].Err.Error(), "Bool") {
		t.Errorf("bool output: %v, want OUTPUT_PARSING naming Bool; response %s", res[0].Err, out)
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
