package main

import (
	"maps"
	"slices"

	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/sidecar"
)

// modelStatus is one model in GET /v1/models and GET /v1/models/{path}.
type modelStatus = sidecar.ModelStatus

// notInSidecar is the error of a model the sync registered that the
// sidecar does not hold.
const notInSidecar = "the model sync registered it, but the sidecar does not hold it (a replay after a sidecar restart failed? see the log)"

// mergeModelStatus joins the sidecar's view (what serves, its signature)
// with the model sync's (checksums as listed, failures, draining), by path.
func mergeModelStatus(infos []sidecar.ModelInfo, synced []modelstore.ModelStatus) []modelStatus {
	byPath := map[string]*modelStatus{}
	for _, in := range infos {
		m := in.Status()
		byPath[in.Path] = &m
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
		m.EvictAt = sidecar.StatusTime(st.EvictAt)
		m.ExternalVariables = st.ExternalVariables
		if st.LastError != "" {
			m.LastError, m.LastErrorAt, m.Failures = st.LastError, sidecar.StatusTime(st.LastErrorAt), st.Failures
		}
	}
	out := make([]modelStatus, 0, len(byPath))
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		out = append(out, *byPath[p])
	}
	return out
}
