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
