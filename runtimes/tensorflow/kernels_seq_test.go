package tensorflow

import (
	"context"
	"fmt"
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

func TestTensorListRoundTrips(t *testing.T) {
	flt := map[string]any{"element_dtype": tensor.Float}
	cases := []graphCase{
		{
			name: "from tensor",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 2})
				es := tfsave.ConstOf[int32](b, "es", []int64{1}, 2)
				l := b.Op("TensorListFromTensor", []string{x, es}, nil)
				anyRank := b.Op("TensorListFromTensor", []string{x, tfsave.ConstOf[int64](b, "unknown", []int64{}, -1)}, nil)
				return map[string]string{"x": x}, map[string]string{
					"item1":  b.Op("TensorListGetItem", []string{l, tfsave.ConstOf[int32](b, "one", []int64{}, 1), es}, flt),
					"stack":  b.Op("TensorListStack", []string{l, es}, map[string]any{"element_dtype": tensor.Float, "num_elements": 3}),
					"length": b.Op("TensorListLength", []string{l}, nil),
					"eshape": b.Op("TensorListElementShape", []string{l}, map[string]any{"shape_type": tensor.Int32}),
					"erank":  b.Op("TensorListElementShape", []string{anyRank}, map[string]any{"shape_type": tensor.Int64}),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{3, 2}, 1, 2, 3, 4, 5, 6))},
			want: map[string]tensor.Tensor{
				"item1":  f32([]int64{2}, 3, 4),
				"stack":  f32([]int64{3, 2}, 1, 2, 3, 4, 5, 6),
				"length": i32([]int64{}, 3),
				"eshape": i32([]int64{1}, 2),
				"erank":  i64([]int64{}, -1),
			},
		},
		{
			name: "reserve set stack",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				a := b.Placeholder("a", tensor.Float, []int64{-1, 2})
				c := b.Placeholder("c", tensor.Float, []int64{-1, 2})
				es := tfsave.ConstOf[int32](b, "es", []int64{2}, -1, 2)
				idx := func(name string, i int32) string { return tfsave.ConstOf[int32](b, name, []int64{}, i) }
				l0 := b.Op("TensorListReserve", []string{es, idx("three", 3)}, flt)
				l1 := b.Op("TensorListSetItem", []string{l0, idx("zero", 0), a}, nil)
				l2 := b.Op("TensorListSetItem", []string{l1, idx("two", 2), c}, nil)
				grown := b.Op("TensorListSetItem", []string{l0, idx("four", 4), a}, map[string]any{"resize_if_index_out_of_bounds": true})
				return map[string]string{"a": a, "c": c}, map[string]string{
					"stack2": b.Op("TensorListStack", []string{l2, es}, flt),
					// l1 is unchanged by the SetItem that made l2.
					"stack1": b.Op("TensorListStack", []string{l1, es}, flt),
					"get2":   b.Op("TensorListGetItem", []string{l2, idx("two2", 2), es}, flt),
					"unset":  b.Op("TensorListGetItem", []string{l0, idx("one", 1), tfsave.ConstOf[int32](b, "es12", []int64{2}, 1, 2)}, flt),
					"length": b.Op("TensorListLength", []string{l2}, nil),
					"grown":  b.Op("TensorListLength", []string{grown}, nil),
					"eshape": b.Op("TensorListElementShape", []string{l2}, map[string]any{"shape_type": tensor.Int64}),
				}
			},
			feed: []tensor.Tensor{named("a", f32([]int64{1, 2}, 1, 2)), named("c", f32([]int64{1, 2}, 5, 6))},
			want: map[string]tensor.Tensor{
				"stack2": f32([]int64{3, 1, 2}, 1, 2, 0, 0, 5, 6),
				"stack1": f32([]int64{3, 1, 2}, 1, 2, 0, 0, 0, 0),
				"get2":   f32([]int64{1, 2}, 5, 6),
				"unset":  f32([]int64{1, 2}, 0, 0),
				"length": i32([]int64{}, 3),
				"grown":  i32([]int64{}, 5),
				"eshape": i64([]int64{2}, -1, 2),
			},
		},
	}
	for _, gc := range cases {
		t.Run(gc.name, func(t *testing.T) { runCase(t, tfsave.Options{}, gc) })
	}
}

func TestTensorListErrors(t *testing.T) {
	x32 := f32([]int64{3, 2}, 1, 2, 3, 4, 5, 6)
	flt := map[string]any{"element_dtype": tensor.Float}
	fromX := func(b *tfsave.Builder, x string) (string, string) {
		es := tfsave.ConstOf[int32](b, "es", []int64{1}, -1)
		return b.Op("TensorListFromTensor", []string{x, es}, nil), es
	}
	idx := func(b *tfsave.Builder, i int32) string { return tfsave.ConstOf[int32](b, "i", []int64{}, i) }
	cases := []struct {
		name  string
		build func(b *tfsave.Builder, x string) string
		want  string
	}{
		{"get out of range", func(b *tfsave.Builder, x string) string {
			l, es := fromX(b, x)
			return b.Op("TensorListGetItem", []string{l, idx(b, 3), es}, flt)
		}, "index 3 is out of range for a list of 3 items"},
		{"set negative", func(b *tfsave.Builder, x string) string {
			l, es := fromX(b, x)
			item := b.Op("TensorListGetItem", []string{l, idx(b, 0), es}, flt)
			l2 := b.Op("TensorListSetItem", []string{l, tfsave.ConstOf[int32](b, "neg", []int64{}, -1), item}, nil)
			return b.Op("TensorListLength", []string{l2}, nil)
		}, "index -1 is out of range for a list of 3 items"},
		{"set wrong shape", func(b *tfsave.Builder, x string) string {
			l := b.Op("TensorListFromTensor", []string{x, tfsave.ConstOf[int32](b, "es", []int64{1}, 2)}, nil)
			l2 := b.Op("TensorListSetItem", []string{l, idx(b, 0), x}, nil)
			return b.Op("TensorListLength", []string{l2}, nil)
		}, "item does not match the list's element shape"},
		{"wrong dtype", func(b *tfsave.Builder, x string) string {
			l, es := fromX(b, x)
			return b.Op("TensorListGetItem", []string{l, idx(b, 0), es}, map[string]any{"element_dtype": tensor.Int32})
		}, "the list holds FLOAT, the op's element_dtype is INT32"},
		{"element shape mismatch", func(b *tfsave.Builder, x string) string {
			l := b.Op("TensorListFromTensor", []string{x, tfsave.ConstOf[int32](b, "es", []int64{1}, 3)}, nil)
			return b.Op("TensorListLength", []string{l}, nil)
		}, "element_shape does not match the tensor's"},
		{"stack unknown shape", func(b *tfsave.Builder, x string) string {
			es := tfsave.ConstOf[int32](b, "es", []int64{}, -1)
			n := b.Op("Cast", []string{b.Op("Sum", []string{x, tfsave.ConstOf[int32](b, "ax", []int64{2}, 0, 1)}, nil)}, map[string]any{"DstT": tensor.Int32})
			l := b.Op("TensorListReserve", []string{es, n}, flt)
			return b.Op("TensorListStack", []string{l, es}, flt)
		}, "is not fully defined"},
		{"stack count", func(b *tfsave.Builder, x string) string {
			l, es := fromX(b, x)
			return b.Op("TensorListStack", []string{l, es}, map[string]any{"element_dtype": tensor.Float, "num_elements": 2})
		}, "the list has 3 items, num_elements is 2"},
		{"reserve too long", func(b *tfsave.Builder, x string) string {
			es := tfsave.ConstOf[int32](b, "es", []int64{}, -1)
			l := b.Op("TensorListReserve", []string{es, tfsave.ConstOf[int32](b, "n", []int64{}, 1<<30)}, flt)
			return b.Op("TensorListStack", []string{l, es}, flt)
		}, "num_elements 1073741824 is out of range"},
		{"stack too large", func(b *tfsave.Builder, x string) string {
			es := tfsave.ConstOf[int32](b, "es", []int64{2}, 1<<16, 1<<16)
			l := b.Op("TensorListReserve", []string{es, idx(b, 4)}, flt)
			return b.Op("TensorListStack", []string{l, es}, flt)
		}, "has more than 268435456 elements"},
		{"unset item too large", func(b *tfsave.Builder, x string) string {
			es := tfsave.ConstOf[int32](b, "es", []int64{2}, 1<<16, 1<<16)
			l := b.Op("TensorListReserve", []string{es, idx(b, 4)}, flt)
			return b.Op("TensorListGetItem", []string{l, tfsave.ConstOf[int32](b, "j", []int64{}, 1), es}, flt)
		}, "item 1 is not set: shape [65536 65536] has more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := seqError(t, x32, c.build)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestTensorListConcurrentCalls runs a Keras-like write loop from many
// goroutines: the reserved list is a folded constant they all share, so a
// SetItem that changed it in place would mix their answers (and trip -race).
func TestTensorListConcurrentCalls(t *testing.T) {
	b := tfsave.NewBuilder()
	flt := map[string]any{"element_dtype": tensor.Float}
	a := b.Placeholder("a", tensor.Float, []int64{-1, 2})
	es := tfsave.ConstOf[int32](b, "es", []int64{2}, -1, 2)
	l := b.Op("TensorListReserve", []string{es, tfsave.ConstOf[int32](b, "n", []int64{}, 4)}, flt)
	for i := range int32(4) {
		item := b.Op("Mul", []string{a, tfsave.ConstOf[float32](b, fmt.Sprintf("k%d", i), []int64{}, float32(i))}, nil)
		l = b.Op("TensorListSetItem", []string{l, tfsave.ConstOf[int32](b, fmt.Sprintf("i%d", i), []int64{}, i), item}, nil)
	}
	b.Signature(tfsave.ServingSignature, map[string]string{"a": a}, map[string]string{"y": b.Op("TensorListStack", []string{l, es}, flt)})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	m := loadFiles(t, files, driver.Config{})
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for range 50 {
				v := float32(g + 1)
				got, err := m.Predict(context.Background(), []tensor.Tensor{named("a", f32([]int64{1, 2}, v, -v))})
				if err != nil {
					errs <- err
					return
				}
				want := []float32{0, 0, v, -v, 2 * v, -2 * v, 3 * v, -3 * v}
				if !closeData(got[0].Data, want) {
					errs <- fmt.Errorf("goroutine %d: got %v, want %v", g, got[0].Data, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
