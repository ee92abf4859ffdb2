package tensorflow

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// TestOneRowBatchKeepsShape rebuilds the TF1 export that answered a [1,1]
// batch with shape []: y = W*x + b with scalar TF1 variables (the
// half_plus_two pattern). TensorFlow broadcasts the scalar to the batch's
// shape, so [1,1] stays [1,1] and [2,1] stays [2,1].
func TestOneRowBatchKeepsShape(t *testing.T) {
	b := tfsave.NewBuilderWith(tfsave.Options{Variables: tfsave.RefVariables})
	x := b.Placeholder("x", tensor.Float, []int64{-1, 1})
	w := b.Variable("W", tensor.New("", []int64{}, []float32{0.5}))
	c := b.Variable("b", tensor.New("", []int64{}, []float32{2}))
	y := b.OpNamed("y", "Add", []string{b.OpNamed("mul", "Mul", []string{w.Value, x}, nil), c.Value}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	m := loadFiles(t, files, driver.Config{})
	for _, tc := range []struct {
		in   tensor.Tensor
		want tensor.Tensor
	}{
		{f32([]int64{1, 1}, 4), f32([]int64{1, 1}, 4)},
		{f32([]int64{2, 1}, 4, 6), f32([]int64{2, 1}, 4, 5)},
	} {
		out, err := m.Predict(context.Background(), []tensor.Tensor{named("x", tc.in)})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out[0].Shape, tc.want.Shape) || !closeData(out[0].Data, tc.want.Data) {
			t.Errorf("input %v: got %v %v, want %v %v", tc.in.Shape, out[0].Shape, out[0].Data, tc.want.Shape, tc.want.Data)
		}
	}
}

// TestBroadcastShapes checks the binary kernels' output shapes against
// TensorFlow's (NumPy's) broadcasting rule, one-element operands included.
func TestBroadcastShapes(t *testing.T) {
	ones := func(shape ...int64) *dense {
		n := numElems(shape)
		d := &dense{dt: dtFloat, shape: shape, f32: make([]float32, n)}
		for i := range d.f32 {
			d.f32[i] = float32(i + 1)
		}
		return d
	}
	for _, tc := range []struct {
		a, b, want []int64
	}{
		{[]int64{}, []int64{1, 1}, []int64{1, 1}},
		{[]int64{1, 1}, []int64{}, []int64{1, 1}},
		{[]int64{1}, []int64{1, 1}, []int64{1, 1}},
		{[]int64{1, 1}, []int64{1}, []int64{1, 1}},
		{[]int64{1, 1, 1}, []int64{1}, []int64{1, 1, 1}},
		{[]int64{1}, []int64{1, 1, 1}, []int64{1, 1, 1}},
		{[]int64{1, 1}, []int64{2, 1}, []int64{2, 1}},
		{[]int64{2, 1}, []int64{1, 1}, []int64{2, 1}},
		{[]int64{2, 1}, []int64{}, []int64{2, 1}},
		{[]int64{1, 1}, []int64{1, 3}, []int64{1, 3}},
		{[]int64{2, 1}, []int64{1, 3}, []int64{2, 3}},
		{[]int64{2, 1}, []int64{3}, []int64{2, 3}},
		{[]int64{0, 1}, []int64{}, []int64{0, 1}},
		{[]int64{1}, []int64{0}, []int64{0}},
		{[]int64{}, []int64{}, []int64{}},
		{[]int64{2, 1}, []int64{3, 1}, nil}, // not broadcastable
	} {
		t.Run(fmt.Sprintf("%v+%v", tc.a, tc.b), func(t *testing.T) {
			v := []*dense{ones(tc.a...), ones(tc.b...), {}, {}}
			add := arithK[float32](dtFloat, opAdd, 0, 1, 2)
			less := boolBinary(0, 1, 3, compareRow[float32]("Less"))
			for name, k := range map[string]kernel{"Add": add, "Less": less} {
				err := k(v)
				out := v[2]
				if name == "Less" {
					out = v[3]
				}
				if tc.want == nil {
					if err == nil {
						t.Errorf("%s: got shape %v, want an error", name, out.shape)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !slices.Equal(out.shape, tc.want) || out.elemCount() != numElems(tc.want) {
					t.Errorf("%s: shape %v (%d elements), want %v", name, out.shape, out.elemCount(), tc.want)
				}
			}
		})
	}
	// Values: a [1,1] batch plus a [2,1] column gives each row its sum.
	v := []*dense{ones(1, 1), ones(2, 1), {}}
	if err := arithK[float32](dtFloat, opAdd, 0, 1, 2)(v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v[2].f32, []float32{2, 3}) {
		t.Errorf("[1,1]+[2,1] = %v, want [2 3]", v[2].f32)
	}
}

// TestReduceAndSqueezeShapes checks keep_dims and squeeze_dims against
// TensorFlow's documented shapes, on one-row batches in particular.
func TestReduceAndSqueezeShapes(t *testing.T) {
	row := f32([]int64{1, 1}, 7)
	two := f32([]int64{2, 1}, 7, 9)
	cube := f32([]int64{1, 1, 3}, 1, 2, 3)
	axes := func(b *tfsave.Builder, name string, ax ...int32) string {
		return tfsave.ConstOf[int32](b, name, []int64{int64(len(ax))}, ax...)
	}
	gc := graphCase{
		name: "reduce and squeeze",
		build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", tensor.Float, []int64{-1, 1})
			y := b.Placeholder("y", tensor.Float, []int64{-1, 1})
			c := b.Placeholder("c", tensor.Float, []int64{1, 1, 3})
			keep := map[string]any{"keep_dims": true}
			return map[string]string{"x": x, "y": y, "c": c}, map[string]string{
				"sum1_keep":    b.Op("Sum", []string{x, axes(b, "a1", 1)}, keep),
				"sum1":         b.Op("Sum", []string{x, axes(b, "a1b", 1)}, nil),
				"sum_neg_keep": b.Op("Sum", []string{x, axes(b, "am1", -1)}, keep),
				"sum_all":      b.Op("Sum", []string{x, axes(b, "a01", 0, 1)}, nil),
				"sum_all_keep": b.Op("Sum", []string{x, axes(b, "a01b", 0, 1)}, keep),
				"sum_none":     b.Op("Sum", []string{x, axes(b, "anone")}, nil),
				"mean0_keep":   b.Op("Mean", []string{y, axes(b, "a0", 0)}, keep),
				"max0":         b.Op("Max", []string{y, axes(b, "a0b", 0)}, nil),
				"sq_all":       b.Op("Squeeze", []string{x}, nil),
				"sq_1":         b.Op("Squeeze", []string{x}, map[string]any{"squeeze_dims": []int64{1}}),
				"sq_m1":        b.Op("Squeeze", []string{y}, map[string]any{"squeeze_dims": []int64{-1}}),
				"sq_cube":      b.Op("Squeeze", []string{c}, nil),
				"sq_cube0":     b.Op("Squeeze", []string{c}, map[string]any{"squeeze_dims": []int64{0}}),
				"sq_cube01":    b.Op("Squeeze", []string{c}, map[string]any{"squeeze_dims": []int64{0, 1}}),
			}
		},
		feed: []tensor.Tensor{named("c", cube), named("x", row), named("y", two)},
		want: map[string]tensor.Tensor{
			"sum1_keep":    f32([]int64{1, 1}, 7),
			"sum1":         f32([]int64{1}, 7),
			"sum_neg_keep": f32([]int64{1, 1}, 7),
			"sum_all":      f32([]int64{}, 7),
			"sum_all_keep": f32([]int64{1, 1}, 7),
			"sum_none":     f32([]int64{1, 1}, 7),
			"mean0_keep":   f32([]int64{1, 1}, 8),
			"max0":         f32([]int64{1}, 9),
			"sq_all":       f32([]int64{}, 7),
			"sq_1":         f32([]int64{1}, 7),
			"sq_m1":        f32([]int64{2}, 7, 9),
			"sq_cube":      f32([]int64{3}, 1, 2, 3),
			"sq_cube0":     f32([]int64{1, 3}, 1, 2, 3),
			"sq_cube01":    f32([]int64{3}, 1, 2, 3),
		},
	}
	runCase(t, tfsave.Options{}, gc)
}

// TestMeanOfNothing: TensorFlow's float Mean over a zero-size dimension is
// NaN (0/0), with the reduced shape.
func TestMeanOfNothing(t *testing.T) {
	in := &dense{dt: dtFloat, shape: []int64{0, 2}, f32: []float32{}}
	ax := &dense{dt: dtInt32, shape: []int64{1}, i32: []int32{0}}
	v := []*dense{in, ax, {}}
	if err := reduceK[float32](dtFloat, "Mean", 0, 1, 2, false)(v); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v[2].shape, []int64{2}) || len(v[2].f32) != 2 || !math.IsNaN(float64(v[2].f32[0])) || !math.IsNaN(float64(v[2].f32[1])) {
		t.Errorf("Mean over [0,2] axis 0 = %v %v, want [2] [NaN NaN]", v[2].shape, v[2].f32)
	}
}
