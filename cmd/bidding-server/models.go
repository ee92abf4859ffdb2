package main

import (
	"maps"
	"slices"
	"time"

	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// modelStatus is one model in GET /v1/models and GET /v1/models/{path}.
type modelStatus struct {
	ModelPath string `json:"model_path"`
	// State: loading, serving, failed or draining (serving until
	// evict_at, then deleted or replaced).
	State string `json:"state"`
	// Checksum of the serving files; ListedChecksum is the config's when
	// it differs (an update pending or failed, or a load that failed).
	Checksum       string       `json:"checksum,omitempty"`
	ListedChecksum string       `json:"listed_checksum,omitempty"`
	LoadedAt       string       `json:"loaded_at,omitempty"`
	EvictAt        string       `json:"evict_at,omitempty"`
	LastError      string       `json:"last_error,omitempty"`
	LastErrorAt    string       `json:"last_error_at,omitempty"`
	Failures       int          `json:"failures,omitempty"`
	LoadMs         float64      `json:"load_ms,omitempty"`
	WarmUpMs       float64      `json:"warm_up_ms,omitempty"`
	Files          int          `json:"files,omitempty"`
	Bytes          int64        `json:"bytes,omitempty"`
	Positional     bool         `json:"positional_inputs,omitempty"`
	Inputs         []tensorSpec `json:"inputs,omitempty"`
	Outputs        []tensorSpec `json:"outputs,omitempty"`
}

// tensorSpec is one input or output of a model's signature.
type tensorSpec struct {
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

// notInSidecar is the error of a model the sync registered that the
// sidecar does not hold.
const notInSidecar = "the model sync registered it, but the sidecar does not hold it (a replay after a sidecar restart failed? see the log)"

// mergeModelStatus joins the sidecar's view (what serves, its signature)
// with the model sync's (checksums as listed, failures, draining), by path.
func mergeModelStatus(infos []sidecar.ModelInfo, synced []modelstore.ModelStatus) []modelStatus {
	byPath := map[string]*modelStatus{}
	for _, in := range infos {
		m := &modelStatus{ModelPath: in.Path, State: string(in.State), Checksum: in.Checksum,
			LoadedAt: formatTime(in.LoadedAt), Files: in.Files, Bytes: in.Bytes,
			LoadMs: ms(in.Load), WarmUpMs: ms(in.WarmUp), Positional: in.Signature.Positional,
			Inputs: specsJSON(in.Signature.Inputs), Outputs: specsJSON(in.Signature.Outputs)}
		byPath[in.Path] = m
	}
	for _, st := range synced {
		m, inSidecar := byPath[st.Path]
		if !inSidecar {
			m = &modelStatus{ModelPath: st.Path, State: string(st.State), Checksum: st.Checksum}
			byPath[st.Path] = m
			if st.State == modelstore.ModelServing || st.State == modelstore.ModelDraining {
				m.State = string(modelstore.ModelFailed)
				m.LastError = notInSidecar
			}
		} else if st.State == modelstore.ModelDraining && m.State == string(sidecar.ModelServing) {
			m.State = string(modelstore.ModelDraining)
		}
		if m.Checksum == "" {
			m.Checksum = st.Checksum
		}
		if st.ListedChecksum != m.Checksum {
			m.ListedChecksum = st.ListedChecksum
		}
		m.EvictAt = formatTime(st.EvictAt)
		if st.LastError != "" {
			m.LastError, m.LastErrorAt, m.Failures = st.LastError, formatTime(st.LastErrorAt), st.Failures
		}
	}
	out := make([]modelStatus, 0, len(byPath))
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		out = append(out, *byPath[p])
	}
	return out
}

func specsJSON(specs []runtimes.TensorSpec) []tensorSpec {
	if len(specs) == 0 {
		return nil
	}
	out := make([]tensorSpec, len(specs))
	for i, s := range specs {
		dt := "UNSPECIFIED"
		if s.DType != tensor.Invalid {
			dt = s.DType.String()
		}
		out[i] = tensorSpec{Name: s.Name, Aliases: s.Aliases, DType: dt, Shape: s.Shape, Optional: s.Optional}
	}
	return out
}

// formatTime is RFC 3339 in UTC with milliseconds, "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
