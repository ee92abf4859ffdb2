package sidecar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
)

// ParseRuntimeConfig parses the JSON of INFERENCE_SIDECAR_RUNTIME_CONFIG
// strictly: unknown fields, trailing data and out-of-range values are
// INPUT_PARSING errors naming the field. An empty or blank string is the
// zero Config (defaults everywhere).
func ParseRuntimeConfig(js string) (runtimes.Config, error) {
	var cfg runtimes.Config
	if strings.TrimSpace(js) == "" {
		return cfg, nil
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: trailing data after the JSON object")
	}
	if bytes.HasPrefix(bytes.TrimSpace([]byte(js)), []byte("null")) {
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: want a JSON object, got null")
	}
	switch {
	case cfg.NumInteropThreads < 0:
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: num_interop_threads is %d, want >= 0", cfg.NumInteropThreads)
	case cfg.NumIntraopThreads < 0:
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: num_intraop_threads is %d, want >= 0", cfg.NumIntraopThreads)
	case cfg.ModelResetProbability < 0 || cfg.ModelResetProbability > 1:
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: model_reset_probability is %v, want 0..1", cfg.ModelResetProbability)
	case cfg.MaxTensorElements < 0:
		return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: max_tensor_elements is %d, want >= 0", cfg.MaxTensorElements)
	}
	for i, c := range cfg.Cpuset {
		if c < 0 || c >= 1<<16 {
			return runtimes.Config{}, inferr.Errorf(inferr.InputParsing, "runtime config: cpuset[%d] is %d, want a CPU number", i, c)
		}
	}
	return cfg, nil
}

// formatErrType prefixes an error with its type, for logs and CLI output.
func formatErrType(err error) string {
	return fmt.Sprintf("%s: %v", inferr.TypeOf(err), err)
}
