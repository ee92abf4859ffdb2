//go:build cgo

package sidecar_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// The sidecar binary batches the models its runtime config names: over the
// socket, the batched model answers bit for bit what the same model
// answers unbatched, and the batcher logs its settings and its counters.
func TestSidecarBinaryDynamicBatching(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	socket := filepath.Join(shortDir(t), "b.sock")
	p := startSidecarBinary(t, socket, "--runtime_config",
		`{"dynamic_batching":{"default":{"max_batch_size":16,"max_delay_us":2000},"models":{"plain/":{}}}}`)
	c, err := sidecar.NewClient(socket, sidecar.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, path := range []string{"mlp/", "plain/"} {
		if err := c.RegisterModel(ctx, path, onnxFixture(t, "mlp.onnx"), ""); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			rows := 1 + i%4
			x := make([]float32, rows*8)
			for j := range x {
				x[j] = float32(i*31+j) / 17
			}
			in := []tensor.Tensor{tensor.New("x", []int64{int64(rows), 8}, x)}
			res, err := c.Predict(ctx, []batch.Entry{{ModelPath: "mlp/", Tensors: in}, {ModelPath: "plain/", Tensors: in}})
			if err != nil || res[0].Err != nil || res[1].Err != nil {
				t.Errorf("caller %d: %v %v", i, err, res)
				return
			}
			got, want := res[0].Tensors[0].Data.([]float32), res[1].Tensors[0].Data.([]float32)
			if len(got) != rows || len(want) != rows {
				t.Errorf("caller %d: %d and %d values for %d rows", i, len(got), len(want), rows)
				return
			}
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("caller %d: batched %v, unbatched %v", i, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	p.done <- nil
	logs := p.stderr.String()
	for _, want := range []string{"dynamic batching on\" model_path=mlp/ max_batch_size=16 max_delay=2ms", "dynamic batching stats\" model_path=mlp/"} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "model_path=plain/ max_batch_size") {
		t.Errorf("plain/ batches although its settings turn batching off:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "dynamic batching stats") {
			t.Log(line)
		}
	}
}
