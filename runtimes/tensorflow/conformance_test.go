package tensorflow

import (
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/conformance"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
)

func TestConformance(t *testing.T) {
	rt, err := runtimes.Open(Name, driver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	// The TF2 Keras layout (computation in a called function) and the TF1
	// layout (ref variables in the main graph).
	for name, opts := range map[string]tfsave.Options{
		"tf2-function": {FunctionCall: true},
		"tf1":          {Variables: tfsave.RefVariables},
	} {
		t.Run(name, func(t *testing.T) {
			fx, err := tfsave.ConformanceFixturesWith(opts)
			if err != nil {
				t.Fatal(err)
			}
			conformance.Run(t, rt, fx)
		})
	}
}

// The same fixtures through an in-process sidecar over a real Unix socket.
func TestSidecarConformance(t *testing.T) {
	fx, err := tfsave.ConformanceFixturesWith(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	conformance.RunSidecar(t, Name, fx)
}
