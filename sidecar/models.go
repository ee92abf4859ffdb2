package sidecar

import (
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar/registry"
)

// The model table is package registry's; these are its names as the
// sidecar's API gives them.

// ModelInfo describes a model the sidecar serves or is loading
// (Server.Models, Client.Models): registry.ModelInfo, with Status.
type ModelInfo registry.ModelInfo

// ModelState is what the sidecar holds at a path.
type ModelState = registry.ModelState

// The states a sidecar reports.
const (
	ModelLoading = registry.ModelLoading
	ModelServing = registry.ModelServing
)

// BatchingStats are the dynamic batching counters of one loaded model.
type BatchingStats = registry.BatchingStats

// The names of the special inputs (and of the sequence_id output) of a
// stateful model's requests: see package registry.
const (
	SequenceIDName      = registry.SequenceIDName
	SequenceControlName = registry.SequenceControlName
	SequenceClientName  = registry.SequenceClientName
)

// sequenceSettingsFromProto reads a registration's sequence settings (nil
// when it has none) and validates them as the runtime config's are.
func sequenceSettingsFromProto(path string, p *inferencepb.SequenceSettings) (*runtimes.SequenceSettings, error) {
	if p == nil {
		return nil, nil
	}
	s := &runtimes.SequenceSettings{Stateful: p.GetStateful(), MaxSequenceNumber: p.MaxSequenceNumber,
		IdleSequenceCleanup: p.IdleSequenceCleanup, LowLatencyTransformation: p.LowLatencyTransformation}
	if err := s.Validate(); err != nil {
		return nil, inferr.Errorf(inferr.InputParsing, "register model %s: sequence_settings: %w", inferr.Quote(path), err)
	}
	return s, nil
}

func sequenceSettingsToProto(s *runtimes.SequenceSettings) *inferencepb.SequenceSettings {
	if s == nil {
		return nil
	}
	return &inferencepb.SequenceSettings{Stateful: s.Stateful, MaxSequenceNumber: s.MaxSequenceNumber,
		IdleSequenceCleanup: s.IdleSequenceCleanup, LowLatencyTransformation: s.LowLatencyTransformation}
}
