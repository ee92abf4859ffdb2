package tensorflow

import (
	"context"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The expected values are derived by hand from TensorFlow's definitions
// (tf.transpose, tf.split, tf.reverse, tf.raw_ops.TensorList*).

func TestSequenceKernels(t *testing.T) {
	x24 := f32([]int64{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8)
	cases := []graphCase{
		{
			name: "transpose",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				x3 := b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "s3", []int64{3}, 2, 1, 3)}, nil)
				ids := tfsave.ConstOf[int64](b, "ids", []int64{2, 3}, 1, 2, 3, 4, 5, 6)
				scalar := tfsave.ConstOf[float32](b, "scalar", []int64{}, 7)
				empty := tfsave.ConstOf[float32](b, "empty", []int64{0, 3})
				perm := func(name string, p ...int32) string {
					return tfsave.ConstOf[int32](b, name, []int64{int64(len(p))}, p...)
				}
				return map[string]string{"x": x}, map[string]string{
					"t10":    b.Op("Transpose", []string{x, perm("p10", 1, 0)}, nil),
					"t01":    b.Op("Transpose", []string{x, perm("p01", 0, 1)}, nil),
					"t201":   b.Op("Transpose", []string{x3, perm("p201", 2, 0, 1)}, nil),
					"int64":  b.Op("Transpose", []string{ids, tfsave.ConstOf[int64](b, "p64", []int64{2}, 1, 0)}, nil),
					"scalar": b.Op("Transpose", []string{scalar, perm("p0")}, nil),
					// Outputs may not be empty: the shape tells.
					"empty": b.Op("Shape", []string{b.Op("Transpose", []string{empty, perm("pe", 1, 0)}, nil)}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6))},
			want: map[string]tensor.Tensor{
				"t10":    f32([]int64{3, 2}, 1, 4, 2, 5, 3, 6),
				"t01":    f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6),
				"t201":   f32([]int64{3, 2, 1}, 1, 4, 2, 5, 3, 6),
				"int64":  i64([]int64{3, 2}, 1, 4, 2, 5, 3, 6),
				"scalar": f32([]int64{}, 7),
				"empty":  i32([]int64{2}, 3, 0),
			},
		},
		{
			name: "split",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 4})
				dim := func(name string, d int32) string { return tfsave.ConstOf[int32](b, name, []int64{}, d) }
				s1 := tfNode(b.Op("Split", []string{dim("d1", 1), x}, map[string]any{"num_split": 2}))
				sm1 := tfNode(b.Op("Split", []string{dim("dm1", -1), x}, map[string]any{"num_split": 2}))
				s0 := tfNode(b.Op("Split", []string{dim("d0", 0), x}, map[string]any{"num_split": 2}))
				one := b.Op("Split", []string{dim("d1b", 1), x}, map[string]any{"num_split": 1})
				return map[string]string{"x": x}, map[string]string{
					"s1a": tfsave.Output(s1, 0), "s1b": tfsave.Output(s1, 1),
					"sm1b": tfsave.Output(sm1, 1),
					"s0a":  tfsave.Output(s0, 0), "s0b": tfsave.Output(s0, 1),
					"one": one,
				}
			},
			feed: []tensor.Tensor{named("x", x24)},
			want: map[string]tensor.Tensor{
				"s1a":  f32([]int64{2, 2}, 1, 2, 5, 6),
				"s1b":  f32([]int64{2, 2}, 3, 4, 7, 8),
				"sm1b": f32([]int64{2, 2}, 3, 4, 7, 8),
				"s0a":  f32([]int64{1, 4}, 1, 2, 3, 4),
				"s0b":  f32([]int64{1, 4}, 5, 6, 7, 8),
				"one":  x24,
			},
		},
		{
			name: "splitv",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 4})
				inferred := tfNode(b.Op("SplitV", []string{x, tfsave.ConstOf[int64](b, "z1", []int64{3}, 1, -1, 0),
					tfsave.ConstOf[int32](b, "dm1", []int64{}, -1)}, map[string]any{"num_split": 3}))
				sized := tfNode(b.Op("SplitV", []string{x, tfsave.ConstOf[int32](b, "z2", []int64{2}, 3, 1),
					tfsave.ConstOf[int32](b, "d1", []int64{}, 1)}, map[string]any{"num_split": 2}))
				return map[string]string{"x": x}, map[string]string{
					"a": tfsave.Output(inferred, 0), "b": tfsave.Output(inferred, 1),
					// The empty piece, concatenated, changes nothing.
					"bempty": b.Op("ConcatV2", []string{tfsave.Output(inferred, 1), tfsave.Output(inferred, 2), tfsave.ConstOf[int32](b, "cat", []int64{}, 1)}, nil),
					"c":      tfsave.Output(sized, 0), "d": tfsave.Output(sized, 1),
				}
			},
			feed: []tensor.Tensor{named("x", x24)},
			want: map[string]tensor.Tensor{
				"a":      f32([]int64{2, 1}, 1, 5),
				"b":      f32([]int64{2, 3}, 2, 3, 4, 6, 7, 8),
				"bempty": f32([]int64{2, 3}, 2, 3, 4, 6, 7, 8),
				"c":      f32([]int64{2, 3}, 1, 2, 3, 5, 6, 7),
				"d":      f32([]int64{2, 1}, 4, 8),
			},
		},
		{
			name: "reverse",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				axes := func(name string, a ...int32) string {
					return tfsave.ConstOf[int32](b, name, []int64{int64(len(a))}, a...)
				}
				return map[string]string{"x": x}, map[string]string{
					"r1":    b.Op("ReverseV2", []string{x, axes("a1", 1)}, nil),
					"rm2":   b.Op("ReverseV2", []string{x, axes("am2", -2)}, nil),
					"r01":   b.Op("ReverseV2", []string{x, tfsave.ConstOf[int64](b, "a01", []int64{2}, 0, 1)}, nil),
					"rnone": b.Op("ReverseV2", []string{x, axes("anone")}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6))},
			want: map[string]tensor.Tensor{
				"r1":    f32([]int64{2, 3}, 3, 2, 1, 6, 5, 4),
				"rm2":   f32([]int64{2, 3}, 4, 5, 6, 1, 2, 3),
				"r01":   f32([]int64{2, 3}, 6, 5, 4, 3, 2, 1),
				"rnone": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6),
			},
		},
	}
	for _, gc := range cases {
		t.Run(gc.name, func(t *testing.T) { runCase(t, tfsave.Options{}, gc) })
	}
}

// seqError builds a one-output model over a fed x and returns the error of
// loading it or of one call (a bad constant input fails at load, where it
// is folded).
func seqError(t *testing.T, x tensor.Tensor, build func(b *tfsave.Builder, x string) string) error {
	t.Helper()
	b := tfsave.NewBuilder()
	shape := make([]int64, len(x.Shape))
	for i := range shape {
		shape[i] = -1
	}
	xs := b.Placeholder("x", x.DType(), shape)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": xs}, map[string]string{"y": build(b, xs)})
	files, err := b.Files()
	if err != nil {
		t.Fatalf("tfsave: %v", err)
	}
	cfg := driver.Config{}
	m, err := runtimes.NewRuntime(Name, cfg, New(cfg)).Load(context.Background(), "test_model/", files)
	if err != nil {
		return err
	}
	defer m.Close()
	x.Name = "x"
	_, err = m.Predict(context.Background(), []tensor.Tensor{x})
	return err
}

func TestSequenceKernelErrors(t *testing.T) {
	x24 := f32([]int64{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8)
	x25 := f32([]int64{2, 5}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	i32v := func(b *tfsave.Builder, name string, v ...int32) string {
		return tfsave.ConstOf[int32](b, name, []int64{int64(len(v))}, v...)
	}
	i32s := func(b *tfsave.Builder, name string, v int32) string {
		return tfsave.ConstOf[int32](b, name, []int64{}, v)
	}
	cases := []struct {
		name  string
		x     tensor.Tensor
		build func(b *tfsave.Builder, x string) string
		want  string
	}{
		{"perm repeats", x24, func(b *tfsave.Builder, x string) string {
			return b.Op("Transpose", []string{x, i32v(b, "p", 0, 0)}, nil)
		}, "not a permutation: 0 appears twice"},
		{"perm out of range", x24, func(b *tfsave.Builder, x string) string {
			return b.Op("Transpose", []string{x, i32v(b, "p", 0, 2)}, nil)
		}, "2 is out of range [0, 2)"},
		{"perm negative", x24, func(b *tfsave.Builder, x string) string {
			return b.Op("Transpose", []string{x, i32v(b, "p", -1, 0)}, nil)
		}, "-1 is out of range [0, 2)"},
		{"perm short", x24, func(b *tfsave.Builder, x string) string {
			return b.Op("Transpose", []string{x, i32v(b, "p", 0)}, nil)
		}, "needs a vector of 2 dimensions"},
		{"uneven split", x25, func(b *tfsave.Builder, x string) string {
			return tfsave.Output(tfNode(b.Op("Split", []string{i32s(b, "d", 1), x}, map[string]any{"num_split": 2})), 0)
		}, "size 5, which 2 splits cannot divide evenly"},
		{"split dim out of range", x24, func(b *tfsave.Builder, x string) string {
			return tfsave.Output(tfNode(b.Op("Split", []string{i32s(b, "d", 2), x}, map[string]any{"num_split": 2})), 0)
		}, "axis 2 is out of range for rank 2"},
		{"splitv two -1", x24, func(b *tfsave.Builder, x string) string {
			return tfsave.Output(tfNode(b.Op("SplitV", []string{x, i32v(b, "z", 1, -1, -1), i32s(b, "d", 1)}, map[string]any{"num_split": 3})), 0)
		}, "more than one -1"},
		{"splitv sum", x24, func(b *tfsave.Builder, x string) string {
			return tfsave.Output(tfNode(b.Op("SplitV", []string{x, i32v(b, "z", 1, 1), i32s(b, "d", 1)}, map[string]any{"num_split": 2})), 0)
		}, "add up to 2, not to dimension 1"},
		{"splitv count", x24, func(b *tfsave.Builder, x string) string {
			return tfsave.Output(tfNode(b.Op("SplitV", []string{x, i32v(b, "z", 4), i32s(b, "d", 1)}, map[string]any{"num_split": 2})), 0)
		}, "has 1 entries for num_split 2"},
		{"reverse twice", x24, func(b *tfsave.Builder, x string) string {
			return b.Op("ReverseV2", []string{x, i32v(b, "a", 1, -1)}, nil)
		}, "names dimension 1 more than once"},
		{"reverse out of range", x24, func(b *tfsave.Builder, x string) string {
			return b.Op("ReverseV2", []string{x, i32v(b, "a", 3)}, nil)
		}, "axis 3 is out of range for rank 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := seqError(t, c.x, c.build)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
