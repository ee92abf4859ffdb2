//go:build cgo

package registry

import (
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
)

func TestBatchedAnswersBitIdenticalONNX(t *testing.T) {
	lib, err := onnx.FindLibrary("")
	testhelp.RequireNative(t, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
	files := runtimes.Files{"mlp.onnx": testhelp.ReadFile(t, "runtimes/onnx/testdata/mlp.onnx")}
	for name, cfg := range map[string]runtimes.Config{
		"one thread":      {LibraryPath: lib, NumIntraopThreads: 1, NumInteropThreads: 1},
		"default threads": {LibraryPath: lib},
	} {
		t.Run(name, func(t *testing.T) { checkBatchedAnswers(t, onnx.Name, cfg, files, 8, "x") })
	}
}
