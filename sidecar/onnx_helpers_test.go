//go:build cgo

package sidecar_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
)

// onnxTestdata holds the ONNX runtime's committed test models.
const onnxTestdata = "../runtimes/onnx/testdata"

// requireONNX returns the ONNX Runtime library path; it skips when the
// library is missing, unless INFERBID_REQUIRE_NATIVE=1 (make test).
func requireONNX(tb testing.TB) string {
	tb.Helper()
	lib, err := onnx.FindLibrary("")
	testhelp.RequireNative(tb, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
	return lib
}

func onnxFixture(tb testing.TB, name string) runtimes.Files {
	tb.Helper()
	return runtimes.Files{name: testhelp.ReadFile(tb, "runtimes/onnx/testdata/"+name)}
}

// shortDir is a private temp dir whose socket paths fit sun_path.
func shortDir(tb testing.TB) string { return testhelp.ShortDir(tb) }

// affineBatch is a batch JSON for the affine fixtures' input "x" [rows,3].
func affineBatch(path string, x []float32) string { return floatBatchJSON(path, 3, x) }

// floatBatchJSON is a one-entry batch JSON for path with one FLOAT input
// "x" of shape [len(x)/cols, cols], values quoted as the reference sends
// them.
func floatBatchJSON(path string, cols int, x []float32) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,%d],"tensor_content":[`, path, len(x)/cols, cols)
	for i, v := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", fmt.Sprint(v))
	}
	b.WriteString("]}]}]}")
	return b.String()
}
