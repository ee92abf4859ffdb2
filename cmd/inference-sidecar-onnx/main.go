package main

import (
	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	_ "github.com/inferbid/inferbid/runtimes/onnx"
)

func main() { sidecarmain.Main("onnx") }
