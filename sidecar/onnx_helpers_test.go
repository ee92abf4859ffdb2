//go:build cgo

package sidecar_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
)

const onnxTestdata = "../runtimes/onnx/testdata"

// requireONNX returns the ONNX Runtime library path; it skips when the
// library is missing, unless INFERBID_REQUIRE_NATIVE=1 (make test).
func requireONNX(tb testing.TB) string {
	tb.Helper()
	lib, err := onnx.FindLibrary("")
	if err != nil {
		if os.Getenv("INFERBID_REQUIRE_NATIVE") == "1" {
			tb.Fatalf("INFERBID_REQUIRE_NATIVE=1 and %v", err)
		}
		tb.Skipf("ONNX Runtime library not installed (scripts/install-onnxruntime.sh): %v", err)
	}
	return lib
}

func onnxFixture(tb testing.TB, name string) runtimes.Files {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(onnxTestdata, name))
	if err != nil {
		tb.Fatal(err)
	}
	return runtimes.Files{name: b}
}

// shortDir is a private temp dir whose socket paths fit sun_path.
func shortDir(tb testing.TB) string {
	tb.Helper()
	d := ""
	if t, ok := tb.(interface{ TempDir() string }); ok {
		d = t.TempDir()
	}
	if d == "" || len(d) > 80 {
		var err error
		d, err = os.MkdirTemp("", "sc")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { os.RemoveAll(d) })
	}
	return d
}

// affineBatch is a batch JSON for the affine fixtures' input "x" [rows,3].
func affineBatch(path string, x []float32) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,3],"tensor_content":[`, path, len(x)/3)
	for i, v := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", fmt.Sprint(v))
	}
	b.WriteString("]}]}]}")
	return b.String()
}
