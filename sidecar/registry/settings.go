package registry

import (
	"time"

	"github.com/inferbid/inferbid/runtimes"
)

// Settings are the sidecar's own part of its runtime config (the JSON of
// INFERENCE_SIDECAR_RUNTIME_CONFIG, which package sidecar parses): how the
// registry serves the models it loads. The runtimes never see them; the
// rest of that JSON is runtimes.Config, what the runtimes read. The zero
// value means defaults everywhere.
type Settings struct {
	// SharedStateModels lists the model paths whose calls share one state
	// (driver.SharedStateModel): what one call assigns, every later call of
	// any client sees. Unlisted, a stateful model's calls each start from
	// the state it had after load. An explicit opt-out, for reproducing
	// B&A's behaviour (with runtimes.Config.ModelResetProbability);
	// per-client state belongs in sequences (StatefulModels).
	SharedStateModels []string `json:"shared_state_models,omitempty"`
	// DynamicBatching lets the registry merge concurrent calls of one model
	// into one runtime call; nil (the default) means off for every model.
	// Backends never see its effect other than as larger batches.
	DynamicBatching *DynamicBatching `json:"dynamic_batching,omitempty"`
	// StatefulModels holds the sequence settings of each model path served
	// as a stateful model with sequences; a path not listed is not.
	StatefulModels map[string]runtimes.SequenceSettings `json:"stateful_models,omitempty"`
	// SequenceCleanerPollWaitMinutes is the time between two sweeps of
	// idle sequences; nil means DefaultSequenceCleanerPollWaitMinutes, 0
	// turns the cleaner off.
	SequenceCleanerPollWaitMinutes *uint32 `json:"sequence_cleaner_poll_wait_minutes,omitempty"`
}

// DefaultSequenceCleanerPollWaitMinutes is sequence_cleaner_poll_wait_minutes'
// default, as in OpenVINO Model Server.
const DefaultSequenceCleanerPollWaitMinutes = 5

// SequenceCleanerPollWait is the time between two sweeps of idle sequences;
// 0 means off.
func (s Settings) SequenceCleanerPollWait() time.Duration {
	if s.SequenceCleanerPollWaitMinutes == nil {
		return DefaultSequenceCleanerPollWaitMinutes * time.Minute
	}
	return time.Duration(*s.SequenceCleanerPollWaitMinutes) * time.Minute
}

// DynamicBatching holds the dynamic batching settings per model path: a
// path listed in Models takes its own settings (all of them: nothing is
// inherited from Default), every other path takes Default.
type DynamicBatching struct {
	Default BatchSettings            `json:"default,omitzero"`
	Models  map[string]BatchSettings `json:"models,omitempty"`
}

// For returns the settings of the model at path. d may be nil (off).
func (d *DynamicBatching) For(path string) BatchSettings {
	if d == nil {
		return BatchSettings{}
	}
	if s, ok := d.Models[path]; ok {
		return s
	}
	return d.Default
}

// BatchSettings turn dynamic batching on for a model when both fields are
// set; the zero value is off.
type BatchSettings struct {
	// MaxBatchSize is the most rows (summed over the merged calls' leading
	// dimensions) one merged call takes.
	MaxBatchSize int `json:"max_batch_size,omitempty"`
	// MaxDelayMicros is how long the first call of a batch waits for
	// others, in microseconds.
	MaxDelayMicros int `json:"max_delay_us,omitempty"`
}

// On reports whether the settings turn batching on.
func (s BatchSettings) On() bool { return s.MaxBatchSize > 0 && s.MaxDelayMicros > 0 }

// MaxDelay is MaxDelayMicros as a duration.
func (s BatchSettings) MaxDelay() time.Duration {
	return time.Duration(s.MaxDelayMicros) * time.Microsecond
}
