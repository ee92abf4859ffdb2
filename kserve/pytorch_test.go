//go:build pytorch && cgo

package kserve_test

import (
	"log/slog"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/runtimes"
	_ "github.com/inferbid/inferbid/runtimes/pytorch"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// Both surfaces against libtorch (go test -tags pytorch, as make test's
// PyTorch run does). TorchScript is positional: names are ignored and the
// signature has no dtypes, so the name and dtype checks are left out.
func TestConformancePyTorch(t *testing.T) {
	rt, err := runtimes.Open("pytorch", runtimes.Config{NumIntraopThreads: 1, NumInteropThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}, sidecar.ClientOptions{})
	read := func(name string) runtimes.Files {
		return runtimes.Files{name: testhelp.ReadFile(t, "runtimes/pytorch/testdata/"+name)}
	}
	runConformance(t, client, affineFixture{Platform: kserve.PlatformPyTorch, Positional: true,
		V1: read("affine_v1.pt"), V2: read("affine_v2.pt"),
		AllDTypes: read("alldtypes.pt"),
		InName:    func(d string) string { return d },
	})
}
