//go:build cgo

package sidecar_test

import (
	"bytes"
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
		BadUTF8:  onnxBadUTF8(t),
	})
}

// onnxBadUTF8 is affine_v1.onnx with its Mul node's op type spelled
// "M\xffl": ONNX Runtime rejects it with "No Op registered for M\xffl",
// a message that is not UTF-8 (which gRPC once turned into Internal).
func onnxBadUTF8(tb testing.TB) runtimes.Files {
	tb.Helper()
	good := onnxFixture(tb, "affine_v1.onnx")["affine_v1.onnx"]
	bad := bytes.Replace(good, []byte("\"\x03Mul"), []byte("\"\x03M\xffl"), 1)
	if bytes.Equal(bad, good) {
		tb.Fatal("affine_v1.onnx has no Mul node to damage")
	}
	return runtimes.Files{"affine_v1.onnx": bad}
}
