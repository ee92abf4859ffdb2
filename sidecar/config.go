package sidecar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/sidecar/registry"
)

// Bounds of the dynamic batching settings (registry.BatchSettings).
const (
	MaxBatchSizeLimit   = 1 << 16
	MaxDelayMicrosLimit = 100_000
)

// RuntimeConfig is the sidecar's runtime config, the JSON of
// INFERENCE_SIDECAR_RUNTIME_CONFIG, in its three parts: what the runtimes
// read (runtimes.Config: threads, output names, library path, element cap,
// model_reset_probability...), what the model registry reads
// (registry.Settings: dynamic_batching, stateful_models,
// shared_state_models, sequence_cleaner_poll_wait_minutes) and what the
// process applies to itself (cpuset). The JSON is one flat object; the
// zero value means defaults everywhere.
type RuntimeConfig struct {
	runtimes.Config
	registry.Settings
	// Cpuset pins the sidecar to these CPUs.
	Cpuset []int `json:"cpuset,omitempty"`
}

// runtimeConfigJSON is the runtime config as read: dynamic_batching is
// kept raw (it shadows the embedded field) and parsed on its own, so that
// its errors can name the setting and the model path at fault.
type runtimeConfigJSON struct {
	RuntimeConfig
	DynamicBatching json.RawMessage `json:"dynamic_batching"`
}

// ParseRuntimeConfig parses the JSON of INFERENCE_SIDECAR_RUNTIME_CONFIG
// strictly: unknown fields, trailing data and out-of-range values are
// INPUT_PARSING errors naming the field. An empty or blank string is the
// zero RuntimeConfig (defaults everywhere).
func ParseRuntimeConfig(js string) (RuntimeConfig, error) {
	if strings.TrimSpace(js) == "" {
		return RuntimeConfig{}, nil
	}
	var in runtimeConfigJSON
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: trailing data after the JSON object")
	}
	if bytes.HasPrefix(bytes.TrimSpace([]byte(js)), []byte("null")) {
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: want a JSON object, got null")
	}
	cfg := in.RuntimeConfig
	switch {
	case cfg.NumInteropThreads < 0:
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: num_interop_threads is %d, want >= 0", cfg.NumInteropThreads)
	case cfg.NumIntraopThreads < 0:
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: num_intraop_threads is %d, want >= 0", cfg.NumIntraopThreads)
	case cfg.ModelResetProbability < 0 || cfg.ModelResetProbability > 1:
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: model_reset_probability is %v, want 0..1", cfg.ModelResetProbability)
	case cfg.MaxTensorElements < 0:
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: max_tensor_elements is %d, want >= 0", cfg.MaxTensorElements)
	case cfg.OutputNames != "" && cfg.OutputNames != driver.OutputNamesGraph && cfg.OutputNames != driver.OutputNamesSignatureKey:
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: output_names is %q, want %q or %q", cfg.OutputNames, driver.OutputNamesGraph, driver.OutputNamesSignatureKey)
	}
	for i, c := range cfg.Cpuset {
		if c < 0 || c >= 1<<16 {
			return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: cpuset[%d] is %d, want a CPU number", i, c)
		}
	}
	db, err := parseDynamicBatching(in.DynamicBatching)
	if err != nil {
		return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %w", err)
	}
	cfg.DynamicBatching = db
	for _, path := range slices.Sorted(maps.Keys(cfg.StatefulModels)) {
		field := fmt.Sprintf("stateful_models[%q]", path)
		if path == "" {
			return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %s: the model path is empty", field)
		}
		if err := cfg.StatefulModels[path].Validate(); err != nil {
			return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %s.%w", field, err)
		}
	}
	for i, path := range cfg.SharedStateModels {
		field := fmt.Sprintf("shared_state_models[%d]", i)
		switch {
		case path == "":
			return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %s: the model path is empty", field)
		case slices.Index(cfg.SharedStateModels, path) < i:
			return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %s: %q is listed twice", field, path)
		case cfg.StatefulModels[path].Stateful:
			return RuntimeConfig{}, inferr.Errorf(inferr.InputParsing, "runtime config: %s is %q, which stateful_models[%q] serves with sequences: a model's calls share one state or keep one per sequence, not both", field, path, path)
		}
	}
	return cfg, nil
}

// parseDynamicBatching reads
//
//	{"default": SETTINGS, "models": {"MODEL_PATH": SETTINGS, ...}}
//
// where SETTINGS is {"max_batch_size": N, "max_delay_us": N}. Absent or
// null is nil (off).
func parseDynamicBatching(raw json.RawMessage) (*registry.DynamicBatching, error) {
	if isNull(raw) {
		return nil, nil
	}
	var in struct {
		Default json.RawMessage            `json:"default"`
		Models  map[string]json.RawMessage `json:"models"`
	}
	if err := decodeObject(raw, &in); err != nil {
		return nil, fmt.Errorf("dynamic_batching: %w", err)
	}
	db := &registry.DynamicBatching{}
	var err error
	if db.Default, err = parseBatchSettings("dynamic_batching.default", in.Default); err != nil {
		return nil, err
	}
	if len(in.Models) > 0 {
		db.Models = make(map[string]registry.BatchSettings, len(in.Models))
	}
	for _, path := range slices.Sorted(maps.Keys(in.Models)) {
		field := fmt.Sprintf("dynamic_batching.models[%q]", path)
		if path == "" {
			return nil, fmt.Errorf("%s: the model path is empty", field)
		}
		if db.Models[path], err = parseBatchSettings(field, in.Models[path]); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// parseBatchSettings reads one SETTINGS object: both fields set turns
// batching on, neither (or null) leaves it off, one without the other is
// an error.
func parseBatchSettings(field string, raw json.RawMessage) (registry.BatchSettings, error) {
	var s registry.BatchSettings
	if isNull(raw) {
		return s, nil
	}
	if err := decodeObject(raw, &s); err != nil {
		return s, fmt.Errorf("%s: %w", field, err)
	}
	switch {
	case s.MaxBatchSize < 0 || s.MaxBatchSize == 1 || s.MaxBatchSize > MaxBatchSizeLimit:
		return s, fmt.Errorf("%s.max_batch_size is %d, want 2..%d (0 or absent for off)", field, s.MaxBatchSize, MaxBatchSizeLimit)
	case s.MaxDelayMicros < 0 || s.MaxDelayMicros > MaxDelayMicrosLimit:
		return s, fmt.Errorf("%s.max_delay_us is %d, want 1..%d microseconds (0 or absent for off)", field, s.MaxDelayMicros, MaxDelayMicrosLimit)
	case s.MaxBatchSize > 0 && s.MaxDelayMicros == 0:
		return s, fmt.Errorf("%s: max_batch_size is set but max_delay_us is not; set both to turn batching on, neither for off", field)
	case s.MaxDelayMicros > 0 && s.MaxBatchSize == 0:
		return s, fmt.Errorf("%s: max_delay_us is set but max_batch_size is not; set both to turn batching on, neither for off", field)
	}
	return s, nil
}

// decodeObject decodes raw, which must be a JSON object, strictly into v.
func decodeObject(raw json.RawMessage, v any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("want a JSON object, got %s", inferr.ClipN(t, 32))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// formatErrType prefixes an error with its type, for logs and CLI output.
func formatErrType(err error) string {
	return fmt.Sprintf("%s: %v", inferr.TypeOf(err), err)
}
