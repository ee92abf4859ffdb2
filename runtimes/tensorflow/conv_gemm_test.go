package tensorflow

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// TestConv2DGemmIdentical checks the GEMM Conv2D (im2col tiles, packed
// filter, fused bias and Relu, split across 1 to 3 goroutines, AVX-512 and
// SSE/AVX packing) against the direct kernel followed by the epilogue, bit
// for bit, on many shapes: 1x1 (the no-copy path), 3x3, 5x2 and 1x7
// windows, strides 1 to 3, dilations, SAME, VALID and EXPLICIT padding,
// batch 1 and 3, channel counts around the kernels' 32-, 16- and 8-column
// blocks, and images large enough for several im2col tiles.
func TestConv2DGemmIdentical(t *testing.T) {
	saved := useGemm512
	defer func() { useGemm512 = saved }()
	r := rand.New(rand.NewPCG(11, 12))
	type shape struct{ nb, ih, iw, ic, kh, kw, oc int }
	shapes := []shape{
		{1, 5, 5, 1, 3, 3, 1}, {1, 7, 6, 3, 3, 3, 8}, {3, 9, 9, 4, 1, 1, 17}, {1, 8, 8, 16, 5, 2, 33},
		{2, 6, 11, 5, 1, 7, 32}, {1, 1, 1, 2, 1, 1, 3}, {1, 4, 4, 2, 4, 4, 5}, {1, 40, 40, 8, 3, 3, 64},
		{1, 3, 3, 130, 3, 3, 7},
	}
	geoms := []spatial{
		{strideH: 1, strideW: 1, dilH: 1, dilW: 1, padding: "SAME"},
		{strideH: 1, strideW: 1, dilH: 1, dilW: 1, padding: "VALID"},
		{strideH: 2, strideW: 3, dilH: 1, dilW: 1, padding: "SAME"},
		{strideH: 2, strideW: 2, dilH: 1, dilW: 1, padding: "VALID"},
		{strideH: 1, strideW: 1, dilH: 2, dilW: 3, padding: "SAME"},
		{strideH: 1, strideW: 2, dilH: 1, dilW: 1, padding: "EXPLICIT", explicit: [4]int{2, 0, 1, 3}},
	}
	for _, s := range shapes {
		for _, g := range geoms {
			xs := []int64{int64(s.nb), int64(s.ih), int64(s.iw), int64(s.ic)}
			fs := []int64{int64(s.kh), int64(s.kw), int64(s.ic), int64(s.oc)}
			c, err := convGeometry(xs, fs, g, false)
			if err != nil {
				continue // a window larger than the padded input
			}
			x, f := randomFloats(r, s.nb*s.ih*s.iw*s.ic), randomFloats(r, s.kh*s.kw*s.ic*s.oc)
			v := []*dense{{dt: dtFloat, shape: xs, f32: x}, {dt: dtFloat, shape: fs, f32: f}, {}}
			if err := convK[float32](dtFloat, 0, 1, 2, g, false)(v); err != nil {
				t.Fatal(err)
			}
			direct := v[2].f32
			bias := randomFloats(r, s.oc)
			biasPad := make([]float32, (s.oc+3)/4*4)
			copy(biasPad, bias)
			for _, ep := range []*epilogue{{}, {bias: bias, biasPad: biasPad, relu: true}} {
				want := append([]float32(nil), direct...)
				for i := 0; i < len(want); i += s.oc {
					ep.apply(want[i : i+s.oc])
				}
				for _, wide := range []bool{false, saved} {
					useGemm512 = wide
					pb := packWeights(packedB{}, f, s.kh*s.kw*s.ic, s.oc)
					for _, threads := range []int{1, 2, 3} {
						name := fmt.Sprintf("%+v %+v bias=%v wide=%v threads=%d", s, g, ep.bias != nil, wide, threads)
						got := make([]float32, len(want)+1)
						got[len(want)] = 42
						// Force a split whatever the size: workers' thresholds
						// would keep these small convolutions serial.
						if threads == 1 {
							conv32Par(&intraop{threads: 1}, got, x, &c, &g, pb, ep)
						} else {
							splitRows(c.nb*c.oh*c.ow, threads, func(lo, hi int) { conv32Rows(got, x, &c, &g, pb, ep, false, lo, hi) })
						}
						if got[len(want)] != 42 {
							t.Fatalf("%s: wrote past the output", name)
						}
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s: element %d is %v, direct kernel %v", name, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// convModel saves a small Keras-style CNN with tfsave: Conv2D 3x3 SAME
// (40 filters) -> BiasAdd -> Relu -> Conv2D 1x1 (8 filters), weights in
// variables restored from the checkpoint.
func convModel(t testing.TB) driver.Files {
	t.Helper()
	r := rand.New(rand.NewPCG(13, 14))
	b := tfsave.NewBuilder()
	x := b.Placeholder("image", tensor.Float, []int64{-1, 12, 12, 3})
	w1 := b.Variable("conv1/kernel", f32([]int64{3, 3, 3, 40}, randomFloats(r, 3*3*3*40)...))
	b1 := b.Variable("conv1/bias", f32([]int64{40}, randomFloats(r, 40)...))
	w2 := b.Variable("conv2/kernel", f32([]int64{1, 1, 40, 8}, randomFloats(r, 40*8)...))
	c1 := b.Op("Conv2D", []string{x, w1.Value}, convAttrs("SAME", 1, 1, 1, 1))
	relu := b.Op("Relu", []string{b.Op("BiasAdd", []string{c1, b1.Value}, nil)}, nil)
	c2 := b.Op("Conv2D", []string{relu, w2.Value}, convAttrs("VALID", 1, 1, 1, 1))
	b.Signature(tfsave.ServingSignature, map[string]string{"image": x}, map[string]string{"features": c2})
	files, err := b.Files()
	if err != nil {
		t.Fatalf("tfsave: %v", err)
	}
	return files
}

// TestConv2DGemmModel loads convModel with the fusion pass (GEMM Conv2D,
// BiasAdd and Relu fused) and without (the direct kernel and separate
// ops), with num_intraop_threads 1, 3 and 0, and checks every answer to a
// batch of 9 images is bit-identical, and that the fused program holds
// the GEMM steps.
func TestConv2DGemmModel(t *testing.T) {
	files := convModel(t)
	const batch = 9
	in := []tensor.Tensor{tensor.New("image", []int64{batch, 12, 12, 3}, randomFloats(rand.New(rand.NewPCG(15, 16)), batch*12*12*3))}
	var want []float32
	defer func() { noFusion = false }()
	for _, fusion := range []bool{false, true} {
		noFusion = !fusion
		for _, threads := range []int{1, 3, 0} {
			dm, err := New(driver.Config{NumIntraopThreads: threads}).Load(context.Background(), files)
			if err != nil {
				t.Fatal(err)
			}
			defer dm.Close()
			var ops []string
			for _, st := range dm.(*model).serve.steps {
				ops = append(ops, st.op)
			}
			joined := strings.Join(ops, " ")
			if hasGemm := strings.Contains(joined, "Conv2D+BiasAdd+Relu"); hasGemm != fusion {
				t.Fatalf("fusion %v: steps %v", fusion, ops)
			}
			res, err := dm.Predict(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := tensor.Data[float32](res[0])
			if len(got) != batch*12*12*8 {
				t.Fatalf("fusion %v threads %d: %d values", fusion, threads, len(got))
			}
			if want == nil {
				want = got
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("fusion %v threads %d: y[%d] = %v, direct kernel %v", fusion, threads, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkConv2DGemm times one 3x3 SAME convolution of a 32x32x32 image
// to 64 channels (benchcmp's BenchmarkConv2D layer, batch 1) on one
// goroutine: the GEMM path (im2col tiles + packed filter) and the direct
// kernel.
func BenchmarkConv2DGemm(b *testing.B) {
	const h, w, ic, oc, kk = 32, 32, 32, 64, 3
	r := rand.New(rand.NewPCG(17, 18))
	x, f := randomFloats(r, h*w*ic), randomFloats(r, kk*kk*ic*oc)
	g := spatial{strideH: 1, strideW: 1, dilH: 1, dilW: 1, padding: "SAME"}
	xs, fs := []int64{1, h, w, ic}, []int64{kk, kk, ic, oc}
	c, err := convGeometry(xs, fs, g, false)
	if err != nil {
		b.Fatal(err)
	}
	flops := func(b *testing.B) {
		b.ReportMetric(2*h*w*kk*kk*ic*oc*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	b.Run("gemm", func(b *testing.B) {
		pb := packWeights(packedB{}, f, kk*kk*ic, oc)
		o := make([]float32, h*w*oc)
		for b.Loop() {
			conv32Par(nil, o, x, &c, &g, pb, nil)
		}
		flops(b)
	})
	b.Run("direct", func(b *testing.B) {
		v := []*dense{{dt: dtFloat, shape: xs, f32: x}, {dt: dtFloat, shape: fs, f32: f}, {}}
		run := convK[float32](dtFloat, 0, 1, 2, g, false)
		for b.Loop() {
			if err := run(v); err != nil {
				b.Fatal(err)
			}
		}
		flops(b)
	})
}
