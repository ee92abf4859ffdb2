package tensorflow

import (
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"

	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The expected values are the examples of TensorFlow's documentation of
// tf.pad, tf.pad(mode="REFLECT"/"SYMMETRIC"), tf.tile and tf.gather with
// batch_dims, or derived by hand from those definitions.

func TestPadTileKernels(t *testing.T) {
	x23 := f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)
	pads := func(b *tfsave.Builder, name string, v ...int32) string {
		return tfsave.ConstOf(b, name, []int64{int64(len(v) / 2), 2}, v...)
	}
	cases := []graphCase{
		{
			name: "pad",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				ids := tfsave.ConstOf[int64](b, "ids", []int64{3}, 7, 8, 9)
				scalar := tfsave.ConstOf[float32](b, "scalar", []int64{}, 5)
				return map[string]string{"x": x}, map[string]string{
					"pad":    b.Op("Pad", []string{x, pads(b, "p", 1, 0, 0, 2)}, nil),
					"none":   b.Op("Pad", []string{x, pads(b, "p0", 0, 0, 0, 0)}, nil),
					"padv2":  b.Op("PadV2", []string{x, pads(b, "p2", 0, 1, 1, 1), tfsave.ConstOf[float32](b, "cv", []int64{}, 9)}, nil),
					"int64":  b.Op("Pad", []string{ids, tfsave.ConstOf[int64](b, "p64", []int64{1, 2}, 2, 1)}, nil),
					"scalar": b.Op("Pad", []string{scalar, tfsave.ConstOf[int32](b, "ps", []int64{0, 2})}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"pad":    f32([]int64{3, 5}, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0),
				"none":   x23,
				"padv2":  f32([]int64{3, 5}, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9),
				"int64":  i64([]int64{6}, 0, 0, 7, 8, 9, 0),
				"scalar": f32([]int64{}, 5),
			},
		},
		{
			name: "mirror pad",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				return map[string]string{"x": x}, map[string]string{
					"reflect":   b.Op("MirrorPad", []string{x, pads(b, "p", 1, 1, 2, 2)}, map[string]any{"mode": "REFLECT"}),
					"symmetric": b.Op("MirrorPad", []string{x, pads(b, "q", 1, 1, 2, 2)}, map[string]any{"mode": "SYMMETRIC"}),
					"sym_edge":  b.Op("MirrorPad", []string{x, pads(b, "r", 2, 0, 0, 3)}, map[string]any{"mode": "SYMMETRIC"}),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"reflect": f32([]int64{4, 7},
					6, 5, 4, 5, 6, 5, 4,
					3, 2, 1, 2, 3, 2, 1,
					6, 5, 4, 5, 6, 5, 4,
					3, 2, 1, 2, 3, 2, 1),
				"symmetric": f32([]int64{4, 7},
					2, 1, 1, 2, 3, 3, 2,
					2, 1, 1, 2, 3, 3, 2,
					5, 4, 4, 5, 6, 6, 5,
					5, 4, 4, 5, 6, 6, 5),
				"sym_edge": f32([]int64{4, 6},
					4, 5, 6, 6, 5, 4,
					1, 2, 3, 3, 2, 1,
					1, 2, 3, 3, 2, 1,
					4, 5, 6, 6, 5, 4),
			},
		},
		{
			name: "tile",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				m := func(name string, v ...int32) string { return tfsave.ConstOf(b, name, []int64{int64(len(v))}, v...) }
				return map[string]string{"x": x}, map[string]string{
					"cols":  b.Op("Tile", []string{x, m("m12", 1, 2)}, nil),
					"rows":  b.Op("Tile", []string{x, m("m21", 2, 1)}, nil),
					"zero":  b.Op("Shape", []string{b.Op("Tile", []string{x, m("m03", 0, 3)}, nil)}, nil),
					"int64": b.Op("Tile", []string{tfsave.ConstOf[int32](b, "v", []int64{2}, 7, 8), tfsave.ConstOf[int64](b, "m64", []int64{1}, 3)}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"cols":  f32([]int64{2, 6}, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6),
				"rows":  f32([]int64{4, 3}, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6),
				"zero":  i32([]int64{2}, 0, 9),
				"int64": i32([]int64{6}, 7, 8, 7, 8, 7, 8),
			},
		},
		{
			name: "gather batch_dims",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				ix := tfsave.ConstOf[int32](b, "ix", []int64{2, 2}, 2, 0, 1, 1)
				ax := func(name string, a int32) string { return tfsave.ConstOf(b, name, []int64{}, a) }
				x3 := b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "s", []int64{3}, 2, 3, 1)}, nil)
				return map[string]string{"x": x}, map[string]string{
					"b1":     b.Op("GatherV2", []string{x, ix, ax("a1", 1)}, map[string]any{"batch_dims": 1}),
					"bm1":    b.Op("GatherV2", []string{x, ix, ax("am1", -1)}, map[string]any{"batch_dims": -1}),
					"rank3":  b.Op("GatherV2", []string{x3, ix, ax("a3", 1)}, map[string]any{"batch_dims": 1}),
					"flat":   b.Op("GatherV2", []string{x, tfsave.ConstOf[int64](b, "iv", []int64{2}, 1, 0), ax("a0", 1)}, map[string]any{"batch_dims": 1}),
					"plain0": b.Op("GatherV2", []string{x, ix, ax("ap", 1)}, map[string]any{"batch_dims": 0}),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"b1":     f32([]int64{2, 2}, 3, 1, 5, 5),
				"bm1":    f32([]int64{2, 2}, 3, 1, 5, 5),
				"rank3":  f32([]int64{2, 2, 1}, 3, 1, 5, 5),
				"flat":   f32([]int64{2}, 2, 4),
				"plain0": f32([]int64{2, 2, 2}, 3, 1, 2, 2, 6, 4, 5, 5),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runCase(t, tfsave.Options{}, c) })
	}
}

func TestPadTileErrors(t *testing.T) {
	x23 := f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)
	pads := func(b *tfsave.Builder, name string, v ...int64) string {
		return tfsave.ConstOf(b, name, []int64{int64(len(v) / 2), 2}, v...)
	}
	mult := func(b *tfsave.Builder, v ...int64) string {
		return tfsave.ConstOf(b, "m", []int64{int64(len(v))}, v...)
	}
	ix := func(b *tfsave.Builder, shape []int64, v ...int32) string { return tfsave.ConstOf(b, "ix", shape, v...) }
	ax := func(b *tfsave.Builder, a int32) string { return tfsave.ConstOf(b, "ax", []int64{}, a) }
	cases := []struct {
		name  string
		build func(b *tfsave.Builder, x string) string
		want  string
	}{
		{"negative padding", func(b *tfsave.Builder, x string) string {
			return b.Op("Pad", []string{x, pads(b, "p", 0, 0, -1, 0)}, nil)
		}, "dimension 1 pads by (-1, 0), which must not be negative"},
		{"paddings shape", func(b *tfsave.Builder, x string) string {
			return b.Op("Pad", []string{x, pads(b, "p", 1, 1)}, nil)
		}, "paddings has shape [1 2]; input of shape [2 3] needs [2 2]"},
		{"huge padding", func(b *tfsave.Builder, x string) string {
			return b.Op("Pad", []string{x, pads(b, "p", 0, 0, 0, 1<<62)}, nil)
		}, "more than 268435456 elements"},
		{"padding product", func(b *tfsave.Builder, x string) string {
			return b.Op("Pad", []string{x, pads(b, "p", 1<<20, 0, 1<<20, 0)}, nil)
		}, "more than 268435456 elements"},
		{"padv2 non-scalar", func(b *tfsave.Builder, x string) string {
			return b.Op("PadV2", []string{x, pads(b, "p", 0, 0, 0, 1), tfsave.ConstOf[float32](b, "cv", []int64{1}, 1)}, nil)
		}, "constant_values has shape [1], want a scalar"},
		{"reflect too far", func(b *tfsave.Builder, x string) string {
			return b.Op("MirrorPad", []string{x, pads(b, "p", 0, 0, 0, 3)}, map[string]any{"mode": "REFLECT"})
		}, "dimension 1 of size 3 pads by (0, 3); REFLECT padding allows at most 2"},
		{"symmetric too far", func(b *tfsave.Builder, x string) string {
			return b.Op("MirrorPad", []string{x, pads(b, "p", 3, 0, 0, 0)}, map[string]any{"mode": "SYMMETRIC"})
		}, "dimension 0 of size 2 pads by (3, 0); SYMMETRIC padding allows at most 2"},
		{"mirror mode", func(b *tfsave.Builder, x string) string {
			return b.Op("MirrorPad", []string{x, pads(b, "p", 0, 0, 0, 1)}, map[string]any{"mode": "WRAP"})
		}, `mode "WRAP" is not REFLECT or SYMMETRIC`},
		{"negative multiple", func(b *tfsave.Builder, x string) string {
			return b.Op("Tile", []string{x, mult(b, 1, -2)}, nil)
		}, "-2 for dimension 1 must not be negative"},
		{"multiples length", func(b *tfsave.Builder, x string) string {
			return b.Op("Tile", []string{x, mult(b, 2)}, nil)
		}, "multiples has shape [1]; input of shape [2 3] needs [2]"},
		{"huge multiple", func(b *tfsave.Builder, x string) string {
			return b.Op("Tile", []string{x, mult(b, 1, 1<<62)}, nil)
		}, "dimension 1 of size 3 times 4611686018427387904 is more than 268435456 elements"},
		{"multiples product", func(b *tfsave.Builder, x string) string {
			return b.Op("Tile", []string{x, mult(b, 1<<14, 1<<14)}, nil)
		}, "more than 268435456 elements"},
		{"batch_dims beyond axis", func(b *tfsave.Builder, x string) string {
			return b.Op("GatherV2", []string{x, ix(b, []int64{2, 1}, 0, 0), ax(b, 0)}, map[string]any{"batch_dims": 1})
		}, "batch_dims 1 must not be larger than axis 0"},
		{"batch_dims beyond indices", func(b *tfsave.Builder, x string) string {
			return b.Op("GatherV2", []string{x, ix(b, []int64{2}, 0, 0), ax(b, 1)}, map[string]any{"batch_dims": 2})
		}, "batch_dims 2 is out of range [-1, 1]"},
		{"batch size differs", func(b *tfsave.Builder, x string) string {
			return b.Op("GatherV2", []string{x, ix(b, []int64{3, 1}, 0, 0, 0), ax(b, 1)}, map[string]any{"batch_dims": 1})
		}, "differ in batch dimension 0"},
		{"batch index out of range", func(b *tfsave.Builder, x string) string {
			return b.Op("GatherV2", []string{x, ix(b, []int64{2, 1}, 0, 3), ax(b, 1)}, map[string]any{"batch_dims": 1})
		}, "index 3 is out of range [0, 3)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := seqError(t, x23, c.build)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "(node ") || inferr.TypeOf(err) != inferr.ModelExecution {
				t.Errorf("error %v is not a MODEL_EXECUTION error naming the node", err)
			}
		})
	}
}
