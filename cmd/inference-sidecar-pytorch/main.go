//go:build pytorch

// Command inference-sidecar-pytorch serves TorchScript models on libtorch
// over a Unix socket: inference-sidecar-pytorch --socket PATH
// [--runtime_config JSON]. Build it with -tags pytorch (cgo, libtorch-dev).
package main

import (
	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	_ "github.com/inferbid/inferbid/runtimes/pytorch"
)

func main() { sidecarmain.Main("pytorch") }
