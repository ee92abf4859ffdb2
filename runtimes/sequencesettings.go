package runtimes

import "fmt"

// SequenceSettings are OpenVINO Model Server's per-model settings of a
// stateful model: the sidecar's runtime config (stateful_models) and a
// registration (its model_metadata entry) carry them; the sidecar's
// registry serves a model with sequences by them; backends never see
// them. Pointers tell absent (the default) from set; every field but
// Stateful is refused unless Stateful is true.
type SequenceSettings struct {
	// Stateful serves the model with one state per sequence.
	Stateful bool `json:"stateful,omitempty"`
	// MaxSequenceNumber bounds the live sequences; nil means 500.
	MaxSequenceNumber *uint32 `json:"max_sequence_number,omitempty"`
	// IdleSequenceCleanup subjects the model to the cleaner; nil means true.
	IdleSequenceCleanup *bool `json:"idle_sequence_cleanup,omitempty"`
	// LowLatencyTransformation is accepted and has no effect: it is an
	// OpenVINO graph rewrite (TensorIterator to memory layers) with nothing
	// to rewrite in the runtimes inferbid has.
	LowLatencyTransformation *bool `json:"low_latency_transformation,omitempty"`
}

// Validate checks the settings; errors name the field (unprefixed, e.g.
// "max_sequence_number is set but stateful is not true").
func (s SequenceSettings) Validate() error {
	if !s.Stateful {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"max_sequence_number", s.MaxSequenceNumber != nil},
			{"idle_sequence_cleanup", s.IdleSequenceCleanup != nil},
			{"low_latency_transformation", s.LowLatencyTransformation != nil},
		} {
			if f.set {
				return fmt.Errorf("%s is set but stateful is not true; it applies to stateful models only", f.name)
			}
		}
		return nil
	}
	if s.MaxSequenceNumber != nil && *s.MaxSequenceNumber == 0 {
		return fmt.Errorf("max_sequence_number is 0, want at least 1 (absent means 500)")
	}
	return nil
}
