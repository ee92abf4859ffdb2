package tensorflow

import (
	"context"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// TestIntegerDivisionErrors: as TensorFlow's integer kernels do, Div,
// FloorDiv and FloorMod by zero and Pow to a negative exponent fail the
// call with an error (Go's integer division by zero would panic; tfjs
// answers 0). Found by the TensorFlow.js oracle tests.
func TestIntegerDivisionErrors(t *testing.T) {
	for _, tc := range []struct {
		op, want string
		y        []int32
	}{
		{"Div", "integer division by zero", []int32{2, 0}},
		{"FloorDiv", "integer division by zero", []int32{0, 3}},
		{"FloorMod", "integer division by zero", []int32{1, 0}},
		{"Pow", "negative integer powers", []int32{2, -1}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			b := tfsave.NewBuilder()
			x := b.Placeholder("x", tensor.Int32, []int64{-1, 2})
			y := tfsave.ConstOf(b, "y", []int64{2}, tc.y...)
			b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"z": b.Op(tc.op, []string{x, y}, nil)})
			files, err := b.Files()
			if err != nil {
				t.Fatal(err)
			}
			m := loadFiles(t, files, driver.Config{})
			_, err = m.Predict(context.Background(), []tensor.Tensor{named("x", i32([]int64{1, 2}, 7, 8))})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			// The pooled call state is not left broken: the next call fails the same way.
			if _, err := m.Predict(context.Background(), []tensor.Tensor{named("x", i32([]int64{1, 2}, 7, 8))}); err == nil {
				t.Fatal("second call succeeded with the same bad divisor")
			}
		})
	}
}

// TestIntegerFloorDivExact: int64 FloorDiv and FloorMod are exact past
// 2^53 (they once went through float64) and floor toward minus infinity;
// int64 Pow wraps around.
func TestIntegerFloorDivExact(t *testing.T) {
	const big = int64(1)<<62 + 3
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Int64, []int64{-1})
	y := tfsave.ConstOf[int64](b, "y", []int64{4}, 2, -3, 7, 1)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{
		"div": b.Op("FloorDiv", []string{x, y}, nil),
		"mod": b.Op("FloorMod", []string{x, y}, nil),
		"pow": b.Op("Pow", []string{tfsave.ConstOf[int64](b, "three", []int64{}, 3), tfsave.ConstOf[int64](b, "e", []int64{}, 41)}, nil),
	})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	m := loadFiles(t, files, driver.Config{})
	got, err := predictNamed(t, m, named("x", i64([]int64{4}, big, big, -7, -big)))
	if err != nil {
		t.Fatal(err)
	}
	// Python: big//2, big//-3, -7//7, -big//1 and the matching %.
	checkFlowOut(t, "div", got["div"], []int64{4}, []int64{big / 2, -(big/3 + 1), -1, -big})
	checkFlowOut(t, "mod", got["mod"], []int64{4}, []int64{1, big - 3*(big/3+1), 0, 0})
	p := int64(1)
	for range 41 {
		p *= 3
	}
	checkFlowOut(t, "pow", got["pow"], nil, []int64{p})
}
