//go:build pytorch && cgo

package pytorch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// e2eInputs is a batch for the e2e-style models (testdata/e2e_style.pt and
// the reference pytorch_e2e_model.pt): five INT64 [rows] indices in 0..19,
// then two FLOAT [rows,10].
func e2eInputs(rows int) []tensor.Tensor {
	var in []tensor.Tensor
	for k := range 5 {
		idx := make([]int64, rows)
		for r := range idx {
			idx[r] = int64((r*7 + k*3) % 20)
		}
		in = append(in, tensor.New(fmt.Sprintf("i%d", k), []int64{int64(rows)}, idx))
	}
	for k := range 2 {
		f := make([]float32, rows*10)
		for i := range f {
			f[i] = float32((i+k*5)%10) / 10
		}
		in = append(in, tensor.New(fmt.Sprintf("f%d", k), []int64{int64(rows), 10}, f))
	}
	return in
}

func warm(b *testing.B, m *runtimes.Model, in []tensor.Tensor) {
	for range m.WarmUpRuns() {
		if _, err := m.Predict(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForward is the bare runtime call (runtimes.Model.Predict: input
// checks, copy in, forward(), copy out) with one intra-op thread.
func BenchmarkForward(b *testing.B) {
	rt := openRuntime(b)
	models := []struct {
		name  string
		files driver.Files
		input func(rows int) []tensor.Tensor
	}{
		{"e2e_style", readTestdata(b, "e2e_style.pt"), e2eInputs},
		{"mlp", readTestdata(b, "mlp.pt"), func(rows int) []tensor.Tensor {
			return []tensor.Tensor{tensor.New("x", []int64{int64(rows), 8}, benchInput(rows))}
		}},
	}
	// The reference e2e model too, when INFERBID_REFERENCE_MODELS is set.
	if dir, ok := testhelp.LookupReferenceModels(b); ok {
		ref, err := os.ReadFile(filepath.Join(dir, "bidding-auction-servers", "pytorch", "pytorch_e2e_model.pt"))
		if err != nil {
			b.Fatal(err)
		}
		models = append(models, struct {
			name  string
			files driver.Files
			input func(rows int) []tensor.Tensor
		}{"reference_e2e", driver.Files{"m.pt": ref}, e2eInputs})
	}
	for _, md := range models {
		m, err := rt.Load(context.Background(), md.name, md.files)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		for _, rows := range []int{1, 64, 1024} {
			in := md.input(rows)
			b.Run(fmt.Sprintf("%s/batch=%d", md.name, rows), func(b *testing.B) {
				warm(b, m, in)
				benchlat.Loop(b, func() error { _, err := m.Predict(context.Background(), in); return err })
			})
		}
	}
}

func e2eJSON(path string, in []tensor.Tensor) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[`, path)
	for i, t := range in {
		if i > 0 {
			b.WriteByte(',')
		}
		dims := make([]string, len(t.Shape))
		for j, d := range t.Shape {
			dims[j] = fmt.Sprint(d)
		}
		fmt.Fprintf(&b, `{"tensor_name":%q,"data_type":%q,"tensor_shape":[%s],"tensor_content":[`, t.Name, t.DType(), strings.Join(dims, ","))
		var vals []string
		switch d := t.Data.(type) {
		case []int64:
			for _, v := range d {
				vals = append(vals, fmt.Sprintf(`"%d"`, v))
			}
		case []float32:
			for _, v := range d {
				vals = append(vals, fmt.Sprintf(`"%v"`, v))
			}
		}
		b.WriteString(strings.Join(vals, ","))
		b.WriteString("]}")
	}
	b.WriteString("]}]}")
	return b.String()
}

// BenchmarkSidecar is the e2e-style model over the Unix socket to a real
// inference-sidecar-pytorch process: the typed path (host-parsed tensors)
// and the JSON path (sidecar parses and renders JSON), next to BenchmarkForward.
func BenchmarkSidecar(b *testing.B) {
	sup := startSidecar(b)
	ctx := context.Background()
	c := sup.Client()
	if err := sup.RegisterModel(ctx, "e2e/", readTestdata(b, "e2e_style.pt"), e2eJSON("e2e/", e2eInputs(1))); err != nil {
		b.Fatal(err)
	}
	b.Run("health-rtt", func(b *testing.B) {
		benchlat.Loop(b, func() error { return c.WaitHealthy(ctx) })
	})
	for _, rows := range []int{1, 64, 1024} {
		in := e2eInputs(rows)
		entries := []batch.Entry{{ModelPath: "e2e/", Tensors: in}}
		js := []byte(e2eJSON("e2e/", in))
		b.Run(fmt.Sprintf("typed/batch=%d", rows), func(b *testing.B) {
			benchlat.Loop(b, func() error { return entryErr(c.Predict(ctx, entries)) })
		})
		b.Run(fmt.Sprintf("json/batch=%d", rows), func(b *testing.B) {
			benchlat.Loop(b, func() error { _, err := c.PredictJSON(ctx, js); return err })
		})
	}
}

// entryErr is the call's error or, failing that, its first entry's.
func entryErr(res []batch.Result, err error) error {
	if err == nil && len(res) > 0 {
		err = res[0].Err
	}
	return err
}
