//go:build cgo

package sidecar_test

import (
	"testing"

	"github.com/inferbid/inferbid/runtimes/conformance"
	"github.com/inferbid/inferbid/runtimes/onnx"
)

// The sidecar conformance suite over a real socket with ONNX Runtime.
func TestSidecarConformanceONNX(t *testing.T) {
	requireONNX(t)
	conformance.RunSidecar(t, onnx.Name, conformance.Fixtures{
		AllDTypes: onnxFixture(t, "alldtypes.onnx"),
		AffineV1:  onnxFixture(t, "affine_v1.onnx"),
		AffineV2:  onnxFixture(t, "affine_v2.onnx"),
	})
}
