package tfsave

import (
	"fmt"

	"github.com/inferbid/inferbid/runtimes/conformance"
)

// ConformanceFixtures returns the runtime conformance suite's models as
// TF2 exports lay them out (resource variables, the computation in a
// function called through (Stateful)PartitionedCall, the traced saver):
// AllDTypesModel, AffineModel(2, 1) and AffineModel(3, -1). The models are fixed, so an
// error here is a bug in this package and panics.
func ConformanceFixtures() conformance.Fixtures {
	fx, err := ConformanceFixturesWith(Options{FunctionCall: true, TracedSaver: true})
	if err != nil {
		panic(err)
	}
	return fx
}

// ConformanceFixturesWith builds the conformance fixtures with opts.
func ConformanceFixturesWith(opts Options) (conformance.Fixtures, error) {
	var fx conformance.Fixtures
	var err error
	if fx.AllDTypes, err = AllDTypesModel(opts); err != nil {
		return fx, fmt.Errorf("tfsave: AllDTypes fixture: %w", err)
	}
	if fx.AffineV1, err = AffineModel(opts, 2, 1); err != nil {
		return fx, fmt.Errorf("tfsave: AffineV1 fixture: %w", err)
	}
	if fx.AffineV2, err = AffineModel(opts, 3, -1); err != nil {
		return fx, fmt.Errorf("tfsave: AffineV2 fixture: %w", err)
	}
	return fx, nil
}
