package sidecar_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// TestMappedModelCapAndStatus: with memory-mapped variables, a TensorFlow
// model whose checkpoint passes MaxModelBytes registers within
// MaxMappedModelBytes (its other files still count against MaxModelBytes),
// GetModels says how much of it is mapped, and a model past the mapped cap
// is refused naming the file and the flag.
func TestMappedModelCapAndStatus(t *testing.T) {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{MapVariablesDir: t.TempDir(), MapVariablesMinBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const data = "variables/variables.data-00000-of-00001"
	var other int64
	for name, b := range files {
		if name != data {
			other += int64(len(b))
		}
	}
	dataSize := int64(len(files[data]))
	if dataSize < 1<<10 {
		t.Fatalf("pCTR's checkpoint is %d bytes, under the test's mapping minimum", dataSize)
	}
	c := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, MaxModelBytes: other, MaxMappedModelBytes: dataSize}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := c.RegisterModel(ctx, "pctr/", files, ""); err != nil {
		t.Fatalf("a model within both caps: %v", err)
	}
	infos, err := c.Models(ctx, "pctr/")
	if err != nil || len(infos) != 1 {
		t.Fatalf("Models: %v, %v", infos, err)
	}
	if in := infos[0]; in.MappedBytes < 100*4*4 || in.MappedBytes+in.CopiedBytes > dataSize {
		t.Errorf("status: %d bytes mapped, %d copied; want the embedding tables mapped, of a %d-byte checkpoint", in.MappedBytes, in.CopiedBytes, dataSize)
	}
	if st := infos[0].Status(); st.MappedBytes != infos[0].MappedBytes {
		t.Errorf("JSON status says %d bytes mapped, the sidecar %d", st.MappedBytes, infos[0].MappedBytes)
	}
	res, err := c.Predict(ctx, []batch.Entry{{ModelPath: "pctr/", Tensors: []tensor.Tensor{
		tensor.New("ad_id", []int64{1, 1}, []int64{7}),
		tensor.New("publisher_id", []int64{1, 1}, []int64{3}),
		tensor.New("dense", []int64{1, tfsave.PCTRDense}, make([]float32, tfsave.PCTRDense)),
	}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("predict on the mapped model: %v, %v", res, err)
	}

	// One byte more checkpoint than the mapped cap.
	big := map[string][]byte{}
	for k, v := range files {
		big[k] = v
	}
	big[data] = append(append([]byte(nil), files[data]...), 0)
	err = c.RegisterModel(ctx, "big/", big, "")
	if inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "max_mapped_model_bytes") || !strings.Contains(err.Error(), data) {
		t.Fatalf("a checkpoint past the mapped cap: %v; want INPUT_PARSING naming %s and --max_mapped_model_bytes", err, data)
	}
}

// TestMappedModelSidecarBinary: the real inference-sidecar-tensorflow with
// --map_variables_min_bytes low enough for pCTR maps its checkpoint into
// its socket's directory (the default --map_variables_dir), leaves no file
// there, reports the mapped bytes, answers as an in-heap sidecar does, and
// --map_variables_min_bytes -1 maps nothing.
func TestMappedModelSidecarBinary(t *testing.T) {
	bin := buildBinary(t, "inference-sidecar-tensorflow", false)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry := []batch.Entry{{ModelPath: "pctr/", Tensors: []tensor.Tensor{
		tensor.New("ad_id", []int64{2, 1}, []int64{7, 99}),
		tensor.New("publisher_id", []int64{2, 1}, []int64{3, 49}),
		tensor.New("dense", []int64{2, tfsave.PCTRDense}, make([]float32, 2*tfsave.PCTRDense)),
	}}}
	var answers [2][]float32
	for i, minBytes := range []string{"1024", "-1"} {
		socket := testhelp.SocketPath(t, "s.sock")
		cmd := exec.Command(bin, "--socket", socket, "--map_variables_min_bytes", minBytes)
		var stderr testhelp.SyncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		c, err := sidecar.NewClient(socket, sidecar.ClientOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatalf("sidecar: %v; stderr: %s", err, stderr.String())
		}
		if err := c.RegisterModel(ctx, "pctr/", files, ""); err != nil {
			t.Fatalf("register: %v; stderr: %s", err, stderr.String())
		}
		infos, err := c.Models(ctx, "pctr/")
		if err != nil || len(infos) != 1 {
			t.Fatalf("Models: %v, %v", infos, err)
		}
		mapped := infos[0].MappedBytes
		if minBytes == "-1" && mapped != 0 || minBytes != "-1" && mapped == 0 {
			t.Errorf("--map_variables_min_bytes %s: %d bytes mapped (copied %d)", minBytes, mapped, infos[0].CopiedBytes)
		}
		ents, err := os.ReadDir(filepath.Dir(socket))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != filepath.Base(socket) {
				t.Errorf("the socket's directory holds %s after the load (mapped files are unlinked at once)", e.Name())
			}
		}
		res, err := c.Predict(ctx, entry)
		if err != nil || res[0].Err != nil {
			t.Fatalf("predict: %v %v", res, err)
		}
		answers[i] = res[0].Tensors[0].Data.([]float32)
		if err := c.DeleteModel(ctx, "pctr/"); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(answers[0], answers[1]) {
		t.Errorf("mapped sidecar answers %v, in-heap %v", answers[0], answers[1])
	}
}
