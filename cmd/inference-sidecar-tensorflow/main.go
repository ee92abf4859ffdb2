// Command inference-sidecar-tensorflow serves TensorFlow SavedModels (pure
// Go, no libtensorflow) over a Unix socket:
// inference-sidecar-tensorflow --socket PATH [--runtime_config JSON].
package main

import (
	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	_ "github.com/inferbid/inferbid/runtimes/tensorflow"
)

func main() { sidecarmain.Main("tensorflow") }
