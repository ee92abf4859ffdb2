//go:build cgo

package sidecar_test

import (
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// The sidecar conformance suite over a real socket with ONNX Runtime.
func TestSidecarConformanceONNX(t *testing.T) {
	requireONNX(t)
	open := func(t *testing.T) *runtimes.Runtime {
		rt, err := runtimes.Open(onnx.Name, runtimes.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	sidecartest.RunConformance(t, open, sidecartest.Fixtures{
		AffineV1: onnxFixture(t, "affine_v1.onnx"),
		AffineV2: onnxFixture(t, "affine_v2.onnx"),
	})
}
