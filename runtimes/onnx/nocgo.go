//go:build !cgo

package onnx

import (
	"context"
	"fmt"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
)

func init() { runtimes.Register(Name, Open) }

// Open returns a backend whose Load always fails: ONNX Runtime is reached
// through cgo, and this binary was built without it.
func Open(cfg driver.Config) (driver.Backend, error) { return noCgoBackend{}, nil }

type noCgoBackend struct{}

func (noCgoBackend) Load(context.Context, driver.Files) (driver.Model, error) {
	return nil, fmt.Errorf("onnx: this binary was built with CGO_ENABLED=0, and ONNX Runtime needs cgo: rebuild with CGO_ENABLED=1 (and gcc installed)")
}

func (noCgoBackend) Close() error { return nil }

// LibraryVersion is "" in a build without cgo.
func LibraryVersion() string { return "" }
