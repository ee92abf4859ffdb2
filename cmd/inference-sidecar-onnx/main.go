// Command inference-sidecar-onnx serves ONNX models over a Unix socket:
// inference-sidecar-onnx --socket PATH [--runtime_config JSON].
package main

import (
	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	_ "github.com/inferbid/inferbid/runtimes/onnx"
)

func main() { sidecarmain.Main("onnx") }
