package main

import (
	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	_ "github.com/inferbid/inferbid/runtimes/tensorflow"
)

func main() { sidecarmain.Main("tensorflow") }
