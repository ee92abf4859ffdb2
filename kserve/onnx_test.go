//go:build cgo

package kserve_test

import (
	"log/slog"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// onnxSidecar serves ONNX Runtime in-process on a real Unix socket; it
// skips without the library, unless INFERBID_REQUIRE_NATIVE=1.
func onnxSidecar(t *testing.T) (*sidecar.Client, affineFixture) {
	t.Helper()
	_, err := onnx.FindLibrary("")
	testhelp.RequireNative(t, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
	rt, err := runtimes.Open(onnx.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}, sidecar.ClientOptions{})
	read := func(name string) runtimes.Files {
		return runtimes.Files{name: testhelp.ReadFile(t, "runtimes/onnx/testdata/"+name)}
	}
	return client, affineFixture{Platform: kserve.PlatformONNX, V1: read("affine_v1.onnx"), V2: read("affine_v2.onnx"),
		AllDTypes: read("alldtypes.onnx"),
		InName:    func(d string) string { return "in_" + d },
		OutName:   func(d string) string { return "out_" + d }}
}

func TestConformanceONNX(t *testing.T) {
	client, fx := onnxSidecar(t)
	runConformance(t, client, fx)
}

func TestV2DTypesONNX(t *testing.T) {
	client, _ := onnxSidecar(t)
	read := func(name string) runtimes.Files {
		return runtimes.Files{name: testhelp.ReadFile(t, "runtimes/onnx/testdata/"+name)}
	}
	runV2DTypesConformance(t, client, v2Fixture{All: read("v2dtypes.onnx"), Typed: read("v2dtypes_typed.onnx"),
		InName:  func(d string) string { return "in_" + d },
		OutName: func(d string) string { return "out_" + d }})
}
