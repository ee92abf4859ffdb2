package tensorflow

import (
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/conformance"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// openRuntime opens a fresh TensorFlow runtime for one conformance subtest.
func openRuntime(t *testing.T) *runtimes.Runtime {
	t.Helper()
	rt, err := runtimes.Open(Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func TestConformance(t *testing.T) {
	// The TF2 Keras layout (computation in a called function) and the TF1
	// layout (ref variables in the main graph). The running sum needs
	// resource variables (AssignAddVariableOp): in the TF1 case it keeps
	// them in the main graph. Its checkpoint starts the sum at 1000.
	for name, c := range map[string]struct{ opts, sumOpts tfsave.Options }{
		"tf2-function": {tfsave.Options{FunctionCall: true}, tfsave.Options{FunctionCall: true}},
		"tf1":          {tfsave.Options{Variables: tfsave.RefVariables}, tfsave.Options{}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := tfsave.BuildConformanceModels(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := tfsave.RunningSumModel(c.sumOpts, 1000)
			if err != nil {
				t.Fatal(err)
			}
			conformance.Run(t, openRuntime, conformance.Fixtures{AllDTypes: m.AllDTypes, AffineV1: m.AffineV1, AffineV2: m.AffineV2,
				RunningSum: sum, RunningSumStart: 1000})
		})
	}
}

// The same models through an in-process sidecar over a real Unix socket.
func TestSidecarConformance(t *testing.T) {
	m, err := tfsave.BuildConformanceModels(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	sidecartest.RunConformance(t, openRuntime, sidecartest.Fixtures{AffineV1: m.AffineV1, AffineV2: m.AffineV2})
}
