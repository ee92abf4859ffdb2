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

// convAttrs are Conv2D/DepthwiseConv2dNative attributes with NHWC strides
// and dilations.
func convAttrs(padding string, sh, sw, dh, dw int) map[string]any {
	return map[string]any{"strides": []int{1, sh, sw, 1}, "padding": padding, "dilations": []int{1, dh, dw, 1}}
}

func poolAttrs(padding string, kh, kw, sh, sw int) map[string]any {
	return map[string]any{"ksize": []int{1, kh, kw, 1}, "strides": []int{1, sh, sw, 1}, "padding": padding}
}

// iota32 is 1, 2, ..., n.
func iota32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i + 1)
	}
	return v
}

// TestConv2D checks Conv2D against outputs derived by hand (the arithmetic
// is in each case's comment). Padding follows TensorFlow's SAME rule:
// out = ceil(in/stride), pad_total = max((out-1)*stride + k_eff - in, 0),
// pad_before = pad_total/2 (the extra element goes after).
func TestConv2D(t *testing.T) {
	cases := []graphCase{
		{
			// x = 1..9 as 3x3, w = [[1,2],[3,4]], VALID:
			// [1+4+12+20, 2+6+15+24, 4+10+21+32, 5+12+24+36].
			name: "valid 2x2",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 3, 1})
				w := tfsave.ConstOf[float32](b, "w", []int64{2, 2, 1, 1}, 1, 2, 3, 4)
				return map[string]string{"x": x}, map[string]string{"y": b.Op("Conv2D", []string{x, w}, convAttrs("VALID", 1, 1, 1, 1))}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{1, 3, 3, 1}, iota32(9)...))},
			want: map[string]tensor.Tensor{"y": f32([]int64{1, 2, 2, 1}, 37, 47, 67, 77)},
		},
		{
			// 3x3 ones filter, SAME, stride 2 on 3x3: out 2x2, pad 1
			// before and 1 after; windows are the 2x2 corners:
			// 1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9.
			name: "same stride 2 odd input",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 3, 1})
				w := tfsave.ConstOf[float32](b, "w", []int64{3, 3, 1, 1}, 1, 1, 1, 1, 1, 1, 1, 1, 1)
				return map[string]string{"x": x}, map[string]string{"y": b.Op("Conv2D", []string{x, w}, convAttrs("SAME", 2, 2, 1, 1))}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{1, 3, 3, 1}, iota32(9)...))},
			want: map[string]tensor.Tensor{"y": f32([]int64{1, 2, 2, 1}, 12, 16, 24, 28)},
		},
		{
			// 1x4 input, 1x2 filter [10,1], SAME stride 1: pad_total 1, all
			// after: [1*10+2, 2*10+3, 3*10+4, 4*10+0].
			// 1x3 filter of ones, SAME stride 2 on width 4: out 2,
			// pad_total max(2+3-4,0)=1, before 0: [1+2+3, 3+4+0].
			name: "same asymmetric padding",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 1, 4, 1})
				w := tfsave.ConstOf[float32](b, "w", []int64{1, 2, 1, 1}, 10, 1)
				ones := tfsave.ConstOf[float32](b, "ones", []int64{1, 3, 1, 1}, 1, 1, 1)
				return map[string]string{"x": x}, map[string]string{
					"s1": b.Op("Conv2D", []string{x, w}, convAttrs("SAME", 1, 1, 1, 1)),
					"s2": b.Op("Conv2D", []string{x, ones}, convAttrs("SAME", 2, 2, 1, 1)),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{1, 1, 4, 1}, 1, 2, 3, 4))},
			want: map[string]tensor.Tensor{
				"s1": f32([]int64{1, 1, 4, 1}, 12, 23, 34, 40),
				"s2": f32([]int64{1, 1, 2, 1}, 6, 7),
			},
		},
		{
			// Channels: pixel [1,2], filter rows [1,2,3] and [4,5,6]:
			// [1+8, 2+10, 3+12]. Batch of two, the second pixel [0,-1].
			name: "channels and batch",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 1, 1, 2})
				w := tfsave.ConstOf[float32](b, "w", []int64{1, 1, 2, 3}, 1, 2, 3, 4, 5, 6)
				return map[string]string{"x": x}, map[string]string{"y": b.Op("Conv2D", []string{x, w}, convAttrs("VALID", 1, 1, 1, 1))}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{2, 1, 1, 2}, 1, 2, 0, -1))},
			want: map[string]tensor.Tensor{"y": f32([]int64{2, 1, 1, 3}, 9, 12, 15, -4, -5, -6)},
		},
		{
			// Dilation 2, filter [1,10], VALID on 1..5: x[i] + 10*x[i+2].
			// EXPLICIT padding 2 left: [0,0,1,2,3] * [1,1] = [0,1,3,5].
			name: "dilation and explicit padding",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 1, 5, 1})
				w := tfsave.ConstOf[float32](b, "w", []int64{1, 2, 1, 1}, 1, 10)
				ones := tfsave.ConstOf[float32](b, "ones", []int64{1, 2, 1, 1}, 1, 1)
				ex := convAttrs("EXPLICIT", 1, 1, 1, 1)
				ex["explicit_paddings"] = []int{0, 0, 0, 0, 2, 0, 0, 0}
				return map[string]string{"x": x}, map[string]string{
					"dil": b.Op("Conv2D", []string{x, w}, convAttrs("VALID", 1, 1, 1, 2)),
					"exp": b.Op("Conv2D", []string{b.Op("Slice", []string{x, tfsave.ConstOf[int32](b, "begin", []int64{4}, 0, 0, 0, 0), tfsave.ConstOf[int32](b, "size", []int64{4}, -1, -1, 3, -1)}, nil), ones}, ex),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{1, 1, 5, 1}, 1, 2, 3, 4, 5))},
			want: map[string]tensor.Tensor{
				"dil": f32([]int64{1, 1, 3, 1}, 31, 42, 53),
				"exp": f32([]int64{1, 1, 4, 1}, 0, 1, 3, 5),
			},
		},
		{
			// Depthwise, channel multiplier 2: pixels [1,2] and [3,4],
			// filter w[kx][c][m] = kx0: [[1,2],[3,4]], kx1: [[5,6],[7,8]];
			// out channel c*2+m = x0[c]*w[0][c][m] + x1[c]*w[1][c][m]:
			// [1+15, 2+18, 6+28, 8+32].
			name: "depthwise",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 1, 2, 2})
				w := tfsave.ConstOf[float32](b, "w", []int64{1, 2, 2, 2}, 1, 2, 3, 4, 5, 6, 7, 8)
				return map[string]string{"x": x}, map[string]string{"y": b.Op("DepthwiseConv2dNative", []string{x, w}, convAttrs("VALID", 1, 1, 1, 1))}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{1, 1, 2, 2}, 1, 2, 3, 4))},
			want: map[string]tensor.Tensor{"y": f32([]int64{1, 1, 1, 4}, 16, 20, 34, 40)},
		},
		{
			name: "float64",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Double, []int64{-1, 3, 3, 1})
				w := tfsave.ConstOf[float64](b, "w", []int64{2, 2, 1, 1}, 1, 2, 3, 4)
				return map[string]string{"x": x}, map[string]string{"y": b.Op("Conv2D", []string{x, w}, convAttrs("VALID", 1, 1, 1, 1))}
			},
			feed: []tensor.Tensor{named("x", f64([]int64{1, 3, 3, 1}, 1, 2, 3, 4, 5, 6, 7, 8, 9))},
			want: map[string]tensor.Tensor{"y": f64([]int64{1, 2, 2, 1}, 37, 47, 67, 77)},
		},
	}
	for _, gc := range cases {
		t.Run(gc.name, func(t *testing.T) { runCase(t, tfsave.Options{}, gc) })
	}
}

// TestConv2DRounding checks the float32 accumulation order: in window
// (kh, kw, c) order, 1 + 1e8 rounds the 1 away (float32 has 24 bits) and
// - 1e8 leaves 0; the reverse order, or float64 accumulation, gives 1.
func TestConv2DRounding(t *testing.T) {
	runCase(t, tfsave.Options{}, graphCase{
		name: "order",
		build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", tensor.Float, []int64{-1, 1, 3, 1})
			w := tfsave.ConstOf[float32](b, "w", []int64{1, 3, 1, 1}, 1, 1, 1)
			return map[string]string{"x": x}, map[string]string{"y": b.Op("Conv2D", []string{x, w}, convAttrs("VALID", 1, 1, 1, 1))}
		},
		feed: []tensor.Tensor{named("x", f32([]int64{1, 1, 3, 1}, 1, 1e8, -1e8))},
		want: map[string]tensor.Tensor{"y": f32([]int64{1, 1, 1, 1}, 0)},
	})
}

// TestPool checks MaxPool and AvgPool against the examples of Keras'
// MaxPooling2D and AveragePooling2D documentation (3x3 input 1..9).
func TestPool(t *testing.T) {
	cases := []graphCase{
		{
			name: "keras examples",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 3, 1})
				return map[string]string{"x": x}, map[string]string{
					// pool 2x2, strides 1: valid -> [[5,6],[8,9]];
					// same -> [[5,6,6],[8,9,9],[8,9,9]].
					"max_valid": b.Op("MaxPool", []string{x}, poolAttrs("VALID", 2, 2, 1, 1)),
					"max_same":  b.Op("MaxPool", []string{x}, poolAttrs("SAME", 2, 2, 1, 1)),
					// Average over the unpadded elements only: the right
					// column averages two values ((3+6)/2), the corner one.
					"avg_same":  b.Op("AvgPool", []string{x}, poolAttrs("SAME", 2, 2, 1, 1)),
					"avg_valid": b.Op("AvgPool", []string{x}, poolAttrs("VALID", 2, 2, 1, 1)),
					// SAME, stride 2 on 3x3: out 2x2, pad 1 after; windows
					// {0,1}x{0,1}, {0,1}x{2}, {2}x{0,1}, {2}x{2}.
					"max_s2": b.Op("MaxPool", []string{x}, poolAttrs("SAME", 2, 2, 2, 2)),
					"avg_s2": b.Op("AvgPool", []string{x}, poolAttrs("SAME", 2, 2, 2, 2)),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{1, 3, 3, 1}, iota32(9)...))},
			want: map[string]tensor.Tensor{
				"max_valid": f32([]int64{1, 2, 2, 1}, 5, 6, 8, 9),
				"max_same":  f32([]int64{1, 3, 3, 1}, 5, 6, 6, 8, 9, 9, 8, 9, 9),
				"avg_same":  f32([]int64{1, 3, 3, 1}, 3, 4, 4.5, 6, 7, 7.5, 7.5, 8.5, 9),
				"avg_valid": f32([]int64{1, 2, 2, 1}, 3, 4, 6, 7),
				"max_s2":    f32([]int64{1, 2, 2, 1}, 5, 6, 8, 9),
				"avg_s2":    f32([]int64{1, 2, 2, 1}, 3, 4.5, 7.5, 9),
			},
		},
		{
			// Keras MaxPooling2D example: 3x4 input, pool 2x2, strides 2,
			// valid -> [[6, 8]]. Two channels: the second is the negation
			// (max of negatives).
			name: "keras stride 2 two channels",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 4, 2})
				return map[string]string{"x": x}, map[string]string{"y": b.Op("MaxPool", []string{x}, poolAttrs("VALID", 2, 2, 2, 2))}
			},
			feed: []tensor.Tensor{named("x", func() tensor.Tensor {
				v := make([]float32, 0, 24)
				for _, x := range iota32(12) {
					v = append(v, x, -x)
				}
				return f32([]int64{1, 3, 4, 2}, v...)
			}())},
			want: map[string]tensor.Tensor{"y": f32([]int64{1, 1, 2, 2}, 6, -1, 8, -3)},
		},
	}
	for _, gc := range cases {
		t.Run(gc.name, func(t *testing.T) { runCase(t, tfsave.Options{}, gc) })
	}
}

// TestFusedBatchNormV3 checks inference mode: epsilon 0.5 and variances
// [3.5, 0.5] make variance+epsilon [4, 1] exactly, so
// y0 = (x-1)*2/2 + 1 = x and y1 = (x-2)*0.5/1 - 1; mean and variance pass
// through to batch_mean/batch_variance (and to reserve_space_1/2, which
// TensorFlow leaves unwritten), and reserve_space_3 is a scalar 0. An empty
// batch gives NaN batch_mean/batch_variance, as in TensorFlow; training
// mode is refused at load.
func TestFusedBatchNormV3(t *testing.T) {
	build := func(b *tfsave.Builder, training, empty bool) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 1, 2, 2})
		in := x
		if empty { // feeds cannot be empty: slice the batch away in the graph
			in = b.Op("Slice", []string{x, tfsave.ConstOf[int32](b, "begin", []int64{4}, 0, 0, 0, 0), tfsave.ConstOf[int32](b, "size", []int64{4}, 0, -1, -1, -1)}, nil)
		}
		bn := b.OpNamed("bn", "FusedBatchNormV3", []string{in,
			tfsave.ConstOf[float32](b, "scale", []int64{2}, 2, 0.5),
			tfsave.ConstOf[float32](b, "offset", []int64{2}, 1, -1),
			tfsave.ConstOf[float32](b, "mean", []int64{2}, 1, 2),
			tfsave.ConstOf[float32](b, "variance", []int64{2}, 3.5, 0.5),
		}, map[string]any{"epsilon": float32(0.5), "exponential_avg_factor": float32(1), "is_training": training})
		if empty { // outputs cannot be empty either: fetch only the statistics
			return map[string]string{"x": x}, map[string]string{"mean": tfsave.Output("bn", 1), "var": tfsave.Output("bn", 2)}
		}
		return map[string]string{"x": x}, map[string]string{
			"y": bn, "mean": tfsave.Output("bn", 1), "var": tfsave.Output("bn", 2),
			"r1": tfsave.Output("bn", 3), "r2": tfsave.Output("bn", 4), "r3": tfsave.Output("bn", 5),
		}
	}
	t.Run("training refused", func(t *testing.T) {
		b := tfsave.NewBuilder()
		ins, outs := build(b, true, false)
		b.Signature(tfsave.ServingSignature, ins, outs)
		files, err := b.Files()
		if err != nil {
			t.Fatal(err)
		}
		if err := loadErr(t, files); !strings.Contains(err.Error(), "is_training=true") {
			t.Fatalf("error %v, want is_training refused", err)
		}
	})
	t.Run("empty batch", func(t *testing.T) {
		b := tfsave.NewBuilder()
		ins, outs := build(b, false, true)
		b.Signature(tfsave.ServingSignature, ins, outs)
		files, err := b.Files()
		if err != nil {
			t.Fatal(err)
		}
		m := loadFiles(t, files, driver.Config{})
		got, err := m.Predict(context.Background(), []tensor.Tensor{named("x", f32([]int64{1, 1, 2, 2}, 1, 2, 3, 4))})
		if err != nil {
			t.Fatal(err)
		}
		for i, spec := range m.Signature().Outputs {
			if k := spec.Aliases[0]; k == "mean" || k == "var" {
				if got[i].Len() != 2 {
					t.Errorf("%s = %v, want 2 NaNs", k, got[i].Data)
				}
				for _, v := range got[i].Data.([]float32) {
					if !math.IsNaN(float64(v)) {
						t.Errorf("%s = %v, want NaN", k, got[i].Data)
					}
				}
			}
		}
	})
	runCase(t, tfsave.Options{}, graphCase{
		name:  "inference",
		build: func(b *tfsave.Builder) (map[string]string, map[string]string) { return build(b, false, false) },
		feed:  []tensor.Tensor{named("x", f32([]int64{1, 1, 2, 2}, 1, 2, 3, 4))},
		want: map[string]tensor.Tensor{
			"y":    f32([]int64{1, 1, 2, 2}, 1, -1, 3, 0),
			"mean": f32([]int64{2}, 1, 2), "var": f32([]int64{2}, 3.5, 0.5),
			"r1": f32([]int64{2}, 1, 2), "r2": f32([]int64{2}, 3.5, 0.5),
			"r3": f32(nil, 0),
		},
	})
}

// TestCNNModel runs a small CNN saved with tfsave end to end (TF2 resource
// variables, TF1 ref variables, and the TF2 layout with the graph in a
// called function): variables restored from the checkpoint, Conv2D -> BiasAdd -> Relu -> MaxPool ->
// Reshape. Input 4x4 = 1..16 (x[i][j] = 4i+j+1); filter channel 0 is
// x[i][j] - x[i+1][j+1] = -5 everywhere, channel 1 the 2x2 mean
// 4i+j+3.5; bias [10, -5]; Relu gives channel 0 = 5 and channel 1 =
// max(4i+j-1.5, 0) on the 3x3 VALID output; MaxPool 2x2 stride 2 SAME
// takes rows/cols {0,1} and {2}: channel 1 = 3.5, 4.5, 7.5, 8.5.
func TestCNNModel(t *testing.T) {
	for _, opts := range []tfsave.Options{{}, {Variables: tfsave.RefVariables}, {FunctionCall: true}} {
		b := tfsave.NewBuilderWith(opts)
		x := b.Placeholder("image", tensor.Float, []int64{-1, 4, 4, 1})
		w := b.Variable("conv/kernel", f32([]int64{2, 2, 1, 2}, 1, 0.25, 0, 0.25, 0, 0.25, -1, 0.25))
		bias := b.Variable("conv/bias", f32([]int64{2}, 10, -5))
		conv := b.Op("Conv2D", []string{x, w.Value}, convAttrs("VALID", 1, 1, 1, 1))
		relu := b.Op("Relu", []string{b.Op("BiasAdd", []string{conv, bias.Value}, nil)}, nil)
		pool := b.Op("MaxPool", []string{relu}, poolAttrs("SAME", 2, 2, 2, 2))
		flat := b.Op("Reshape", []string{pool, tfsave.ConstOf[int32](b, "flat_shape", []int64{2}, -1, 8)}, nil)
		b.Signature(tfsave.ServingSignature, map[string]string{"image": x}, map[string]string{"features": flat})
		files, err := b.Files()
		if err != nil {
			t.Fatalf("tfsave: %v", err)
		}
		m := loadFiles(t, files, driver.Config{})
		img := iota32(16)
		img2 := make([]float32, 16)
		for i := range img2 {
			img2[i] = -img[i] // all negative: channel 1 is 0 after Relu, channel 0 still 5
		}
		got, err := m.Predict(context.Background(), []tensor.Tensor{named("image", f32([]int64{2, 4, 4, 1}, append(img, img2...)...))})
		if err != nil {
			t.Fatal(err)
		}
		want := f32([]int64{2, 8}, 5, 3.5, 5, 4.5, 5, 7.5, 5, 8.5, 15, 0, 15, 0, 15, 0, 15, 0)
		if len(got) != 1 || !closeData(got[0].Data, want.Data) || len(got[0].Shape) != 2 || got[0].Shape[0] != 2 || got[0].Shape[1] != 8 {
			t.Fatalf("options %+v: got %v, want %v %v", opts, got, want.Shape, want.Data)
		}
	}
}

// TestConvErrors checks that bad attributes fail the load and bad shapes
// the call, with messages naming what is wrong.
func TestConvErrors(t *testing.T) {
	build := func(op string, attrs map[string]any) driver.Files {
		b := tfsave.NewBuilder()
		x := b.Placeholder("x", tensor.Float, nil) // unknown rank: the kernel checks it
		var y string
		if op == "MaxPool" {
			y = b.Op(op, []string{x}, attrs)
		} else {
			y = b.Op(op, []string{x, tfsave.ConstOf[float32](b, "w", []int64{1, 1, 2, 1}, 1, 1)}, attrs)
		}
		b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
		files, err := b.Files()
		if err != nil {
			t.Fatalf("tfsave: %v", err)
		}
		return files
	}
	nchw := convAttrs("VALID", 1, 1, 1, 1)
	nchw["data_format"] = "NCHW"
	badPad := convAttrs("REFLECT", 1, 1, 1, 1)
	badStride := convAttrs("VALID", 1, 1, 1, 1)
	badStride["strides"] = []int{2, 1, 1, 1}
	hugePad := convAttrs("EXPLICIT", 1, 1, 1, 1)
	hugePad["explicit_paddings"] = []int{0, 0, 1 << 40, 0, 0, 0, 0, 0}
	unequal := convAttrs("VALID", 1, 2, 1, 1)
	for _, tc := range []struct {
		name, op string
		attrs    map[string]any
		want     string
	}{
		{"nchw", "Conv2D", nchw, `data_format "NCHW"`},
		{"padding", "Conv2D", badPad, `padding "REFLECT"`},
		{"batch stride", "Conv2D", badStride, "batch and depth"},
		{"explicit pad", "Conv2D", hugePad, "explicit_paddings value"},
		{"depthwise strides", "DepthwiseConv2dNative", unequal, "needs equal strides"},
		{"pool ksize", "MaxPool", map[string]any{"ksize": []int{1, 2, 2}, "strides": []int{1, 1, 1, 1}, "padding": "VALID"}, "ksize has 3 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := loadErr(t, build(tc.op, tc.attrs))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("channel mismatch", func(t *testing.T) {
		m := loadFiles(t, build("Conv2D", convAttrs("VALID", 1, 1, 1, 1)), driver.Config{})
		_, err := m.Predict(context.Background(), []tensor.Tensor{named("x", f32([]int64{1, 1, 1, 3}, 1, 2, 3))})
		if err == nil || !strings.Contains(err.Error(), "input channels") {
			t.Fatalf("error %v, want a channel mismatch", err)
		}
	})
	t.Run("rank", func(t *testing.T) {
		m := loadFiles(t, build("MaxPool", poolAttrs("VALID", 1, 1, 1, 1)), driver.Config{})
		_, err := m.Predict(context.Background(), []tensor.Tensor{named("x", f32([]int64{1, 2, 2}, 1, 2, 3, 4))})
		if err == nil || !strings.Contains(err.Error(), "4-D") {
			t.Fatalf("error %v, want a rank error", err)
		}
	})
}

// BenchmarkCNN runs a small MNIST-shaped CNN (28x28x1 -> Conv 3x3x16 SAME ->
// BiasAdd -> Relu -> MaxPool 2x2 -> Conv 3x3x32 SAME -> Relu -> MaxPool 2x2
// -> Reshape) at batch 1 and 64 and reports the convolutions' MFLOP/s.
func BenchmarkCNN(b *testing.B) {
	bld := tfsave.NewBuilder()
	x := bld.Placeholder("image", tensor.Float, []int64{-1, 28, 28, 1})
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%7-3) / 8
		}
		return v
	}
	w1 := bld.Variable("conv1/kernel", f32([]int64{3, 3, 1, 16}, fill(3*3*16)...))
	b1 := bld.Variable("conv1/bias", f32([]int64{16}, fill(16)...))
	w2 := bld.Variable("conv2/kernel", f32([]int64{3, 3, 16, 32}, fill(3*3*16*32)...))
	h := bld.Op("Relu", []string{bld.Op("BiasAdd", []string{bld.Op("Conv2D", []string{x, w1.Value}, convAttrs("SAME", 1, 1, 1, 1)), b1.Value}, nil)}, nil)
	h = bld.Op("MaxPool", []string{h}, poolAttrs("VALID", 2, 2, 2, 2))
	h = bld.Op("Relu", []string{bld.Op("Conv2D", []string{h, w2.Value}, convAttrs("SAME", 1, 1, 1, 1))}, nil)
	h = bld.Op("MaxPool", []string{h}, poolAttrs("VALID", 2, 2, 2, 2))
	flat := bld.Op("Reshape", []string{h, tfsave.ConstOf[int32](bld, "flat_shape", []int64{2}, -1, 7*7*32)}, nil)
	bld.Signature(tfsave.ServingSignature, map[string]string{"image": x}, map[string]string{"features": flat})
	files, err := bld.Files()
	if err != nil {
		b.Fatal(err)
	}
	m := loadFiles(b, files, driver.Config{})
	// Multiply-adds per image: 28*28*16*9 + 14*14*32*9*16.
	const flopsPerImage = 2 * (28*28*16*9 + 14*14*32*9*16)
	for _, batch := range []int{1, 64} {
		in := []tensor.Tensor{named("image", f32([]int64{int64(batch), 28, 28, 1}, fill(batch*28*28)...))}
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Predict(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(flopsPerImage*batch)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MFLOP/s")
		})
	}
}

// TestConv2DAgainstDefinition compares Conv2D and DepthwiseConv2dNative on
// seeded random inputs (odd and even sizes, strides 1-3, dilations 1-2,
// SAME and VALID) with a float64 evaluation of the definition, where the
// SAME padding is derived from TensorFlow's documented rule. The tolerance
// is 1e-5 of the sum of the terms' magnitudes (float32 rounding).
func TestConv2DAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 3))
	for i := range 24 {
		depthwise := i%4 == 3
		n, ih, iw, ic := 1+rng.IntN(2), 1+rng.IntN(7), 1+rng.IntN(7), 1+rng.IntN(3)
		kh, kw, m := 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3)
		sh, sw, dh, dw := 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(2), 1+rng.IntN(2)
		if depthwise {
			sw = sh // as TensorFlow requires
		}
		padding := []string{"SAME", "VALID"}[rng.IntN(2)]
		effH, effW := (kh-1)*dh+1, (kw-1)*dw+1
		var oh, ow, pt, pl int
		if padding == "VALID" {
			if ih < effH || iw < effW {
				continue
			}
			oh, ow = (ih-effH)/sh+1, (iw-effW)/sw+1
		} else {
			oh, ow = (ih+sh-1)/sh, (iw+sw-1)/sw
			pt, pl = max((oh-1)*sh+effH-ih, 0)/2, max((ow-1)*sw+effW-iw, 0)/2
		}
		oc := m
		if depthwise {
			oc = ic * m
		}
		x := make([]float32, n*ih*iw*ic)
		w := make([]float32, kh*kw*ic*m)
		for j := range x {
			x[j] = rng.Float32()*2 - 1
		}
		for j := range w {
			w[j] = rng.Float32()*2 - 1
		}
		want := make([]float64, n*oh*ow*oc)
		bound := make([]float64, len(want))
		for b := range n {
			for y := range oh {
				for xx := range ow {
					for o := range oc {
						var s, mag float64
						for ky := range kh {
							for kx := range kw {
								iy, ix := y*sh-pt+ky*dh, xx*sw-pl+kx*dw
								if iy < 0 || iy >= ih || ix < 0 || ix >= iw {
									continue
								}
								for c := range ic {
									var wv float32
									switch {
									case !depthwise:
										wv = w[((ky*kw+kx)*ic+c)*m+o]
									case c == o/m:
										wv = w[((ky*kw+kx)*ic+c)*m+o%m]
									default:
										continue
									}
									p := float64(x[((b*ih+iy)*iw+ix)*ic+c]) * float64(wv)
									s += p
									mag += math.Abs(p)
								}
							}
						}
						k := ((b*oh+y)*ow+xx)*oc + o
						want[k], bound[k] = s, 1e-5*mag+1e-30
					}
				}
			}
		}
		op := "Conv2D"
		if depthwise {
			op = "DepthwiseConv2dNative"
		}
		name := fmt.Sprintf("%s x%v w%v strides %d,%d dilations %d,%d %s", op, []int{n, ih, iw, ic}, []int{kh, kw, ic, m}, sh, sw, dh, dw, padding)
		if oh == 0 || ow == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			bld := tfsave.NewBuilder()
			xp := bld.Placeholder("x", tensor.Float, []int64{-1, int64(ih), int64(iw), int64(ic)})
			wc := bld.Const("w", f32([]int64{int64(kh), int64(kw), int64(ic), int64(m)}, w...))
			bld.Signature(tfsave.ServingSignature, map[string]string{"x": xp}, map[string]string{"y": bld.Op(op, []string{xp, wc}, convAttrs(padding, sh, sw, dh, dw))})
			files, err := bld.Files()
			if err != nil {
				t.Fatal(err)
			}
			got, err := loadFiles(t, files, driver.Config{}).Predict(context.Background(), []tensor.Tensor{named("x", f32([]int64{int64(n), int64(ih), int64(iw), int64(ic)}, x...))})
			if err != nil {
				t.Fatal(err)
			}
			if s := got[0].Shape; len(s) != 4 || s[0] != int64(n) || s[1] != int64(oh) || s[2] != int64(ow) || s[3] != int64(oc) {
				t.Fatalf("shape %v, want [%d %d %d %d]", s, n, oh, ow, oc)
			}
			for k, g := range got[0].Data.([]float32) {
				if math.Abs(float64(g)-want[k]) > bound[k] {
					t.Fatalf("element %d = %v, want %v (±%g)", k, g, want[k], bound[k])
				}
			}
		})
	}
}
