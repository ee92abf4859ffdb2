package sidecar

import (
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// ModelStatus is one model as bidding-server's GET /v1/models and
// GET /v1/models/{path} describe it, and as `inferctl models` prints it:
// a ModelInfo in JSON, to which bidding-server adds what its model sync
// knows (listed checksum, failures, draining).
type ModelStatus struct {
	ModelPath string `json:"model_path"`
	// State: loading, serving, failed or draining (serving until
	// evict_at, then deleted or replaced).
	State string `json:"state"`
	// Checksum of the serving files; ListedChecksum is the config's when
	// it differs (an update pending or failed, or a load that failed).
	Checksum       string  `json:"checksum,omitempty"`
	ListedChecksum string  `json:"listed_checksum,omitempty"`
	LoadedAt       string  `json:"loaded_at,omitempty"`
	EvictAt        string  `json:"evict_at,omitempty"`
	LastError      string  `json:"last_error,omitempty"`
	LastErrorAt    string  `json:"last_error_at,omitempty"`
	Failures       int     `json:"failures,omitempty"`
	LoadMs         float64 `json:"load_ms,omitempty"`
	WarmUpMs       float64 `json:"warm_up_ms,omitempty"`
	Files          int     `json:"files,omitempty"`
	Bytes          int64   `json:"bytes,omitempty"`
	// MappedBytes and CopiedBytes: how the runtime holds the weights
	// (ModelInfo), when it can tell.
	MappedBytes int64 `json:"mapped_bytes,omitempty"`
	CopiedBytes int64 `json:"copied_bytes,omitempty"`
	// ExternalVariables: the variables served from a store (variable ->
	// store URL), as the model sync registered them.
	ExternalVariables map[string]string  `json:"external_variables,omitempty"`
	Positional        bool               `json:"positional_inputs,omitempty"`
	Inputs            []StatusTensorSpec `json:"inputs,omitempty"`
	Outputs           []StatusTensorSpec `json:"outputs,omitempty"`
}

// StatusTensorSpec is one input or output of a model's signature in a
// ModelStatus.
type StatusTensorSpec struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"`
	// DType is one of the six contract types, or UNSPECIFIED (any, or a
	// type outside them).
	DType string `json:"dtype"`
	// Shape is null when even the rank is unknown; -1 marks an unknown
	// dimension.
	Shape    []int64 `json:"shape"`
	Optional bool    `json:"optional,omitempty"`
}

// Status is in as a ModelStatus.
func (in ModelInfo) Status() ModelStatus {
	return ModelStatus{ModelPath: in.Path, State: string(in.State), Checksum: in.Checksum,
		LoadedAt: StatusTime(in.LoadedAt), Files: in.Files, Bytes: in.Bytes, MappedBytes: in.MappedBytes, CopiedBytes: in.CopiedBytes,
		LoadMs: millis(in.Load), WarmUpMs: millis(in.WarmUp), Positional: in.Signature.Positional,
		Inputs: statusSpecs(in.Signature.Inputs), Outputs: statusSpecs(in.Signature.Outputs)}
}

func statusSpecs(specs []runtimes.TensorSpec) []StatusTensorSpec {
	if len(specs) == 0 {
		return nil
	}
	out := make([]StatusTensorSpec, len(specs))
	for i, s := range specs {
		dt := "UNSPECIFIED"
		if s.DType != tensor.Invalid {
			dt = s.DType.String()
		}
		out[i] = StatusTensorSpec{Name: s.Name, Aliases: s.Aliases, DType: dt, Shape: s.Shape, Optional: s.Optional}
	}
	return out
}

// StatusTime is a ModelStatus time: RFC 3339 in UTC with milliseconds, ""
// for the zero time.
func StatusTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
