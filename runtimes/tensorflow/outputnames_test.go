package tensorflow_test

import (
	"context"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// TestOutputNamesSignatureKey: with output_names "signature_key" an output
// answers under its signature key ("pctr"), not the graph tensor
// ("pctr:0"), with the same values; the signature keeps the graph name
// with the key as its alias either way. An unknown value fails the open.
func TestOutputNamesSignatureKey(t *testing.T) {
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := []tensor.Tensor{
		tensor.New("ad_id", []int64{1, 1}, []int64{12}),
		tensor.New("publisher_id", []int64{1, 1}, []int64{7}),
		tensor.New("dense", []int64{1, tfsave.PCTRDense}, make([]float32, tfsave.PCTRDense)),
	}
	var values [2][]float32
	for i, c := range []struct{ cfg, want string }{{"", "pctr:0"}, {"signature_key", "pctr"}} {
		rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{OutputNames: c.cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		m, err := rt.Load(context.Background(), "pctr/v1/", files)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		out, err := m.Predict(context.Background(), in)
		if err != nil || len(out) != 1 {
			t.Fatalf("output_names %q: %v %v", c.cfg, out, err)
		}
		if out[0].Name != c.want {
			t.Errorf("output_names %q: output named %q, want %q", c.cfg, out[0].Name, c.want)
		}
		values[i] = out[0].Data.([]float32)
		if o := m.Signature().Outputs[0]; o.Name != "pctr:0" || len(o.Aliases) != 1 || o.Aliases[0] != "pctr" {
			t.Errorf("output_names %q: signature output %+v, want pctr:0 aliased pctr", c.cfg, o)
		}
	}
	if values[0][0] != values[1][0] {
		t.Errorf("values differ with the names: %v vs %v", values[0], values[1])
	}
	if _, err := runtimes.Open(tensorflow.Name, runtimes.Config{OutputNames: "keys"}); err == nil {
		t.Error("output_names \"keys\" opened")
	}
}
