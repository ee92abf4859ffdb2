package tfsave

import "fmt"

// ConformanceModels are the models of the runtime conformance suite, as
// plain files (path -> contents): the six-dtype identity model and two
// versions of the affine model (y = 2x+1 and y = 3x-1).
type ConformanceModels struct {
	AllDTypes, AffineV1, AffineV2 map[string][]byte
}

// BuildConformanceModels builds AllDTypesModel, AffineModel(2, 1) and
// AffineModel(3, -1) with opts.
func BuildConformanceModels(opts Options) (ConformanceModels, error) {
	var m ConformanceModels
	var err error
	if m.AllDTypes, err = AllDTypesModel(opts); err != nil {
		return m, fmt.Errorf("tfsave: AllDTypes model: %w", err)
	}
	if m.AffineV1, err = AffineModel(opts, 2, 1); err != nil {
		return m, fmt.Errorf("tfsave: AffineV1 model: %w", err)
	}
	if m.AffineV2, err = AffineModel(opts, 3, -1); err != nil {
		return m, fmt.Errorf("tfsave: AffineV2 model: %w", err)
	}
	return m, nil
}
