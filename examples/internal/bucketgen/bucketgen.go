package bucketgen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
)

// ConfigName is the config object's key in the bucket.
const ConfigName = "model_config.json"

// Model is one model of the sample bucket.
type Model struct {
	Path   string // bucket prefix and model path, e.g. "pctr/v2/"
	Build  func() (runtimes.Files, error)
	WarmUp string // warm-up batch JSON
}

// Models are the sample models. v1 of pCTR is a TF1-style export (VariableV2
// variables, everything in the main graph), v2 a TF2 Keras-style export (the
// computation in a function called through StatefulPartitionedCall): the
// same weights, two real SavedModel layouts; the bidding script picks the
// highest version.
func Models() []Model {
	pctrWarm := `{"request":[{"model_path":"%s","tensors":[` +
		`{"tensor_name":"ad_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["1"]},` +
		`{"tensor_name":"publisher_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["1"]},` +
		`{"tensor_name":"dense","data_type":"FLOAT","tensor_shape":[1,6],"tensor_content":["0","0","0","0","0","0"]}]}]}`
	pcvrWarm := `{"request":[{"model_path":"%s","tensors":[` +
		`{"tensor_name":"campaign_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["1"]},` +
		`{"tensor_name":"country_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["1"]},` +
		`{"tensor_name":"features","data_type":"DOUBLE","tensor_shape":[1,5],"tensor_content":["0","0","0","0","0"]}]}]}`
	return []Model{
		{Path: "pctr/v1/", Build: func() (runtimes.Files, error) {
			return tfsave.PCTRModel(tfsave.Options{Variables: tfsave.RefVariables})
		}, WarmUp: fmt.Sprintf(pctrWarm, "pctr/v1/")},
		{Path: "pctr/v2/", Build: func() (runtimes.Files, error) {
			return tfsave.PCTRModel(tfsave.Options{FunctionCall: true})
		}, WarmUp: fmt.Sprintf(pctrWarm, "pctr/v2/")},
		{Path: "pcvr/v1/", Build: func() (runtimes.Files, error) {
			return tfsave.PCVRModel(tfsave.Options{FunctionCall: true})
		}, WarmUp: fmt.Sprintf(pcvrWarm, "pcvr/v1/")},
	}
}

type configEntry struct {
	ModelPath     string `json:"model_path"`
	Checksum      string `json:"checksum"`
	WarmUp        string `json:"warm_up_batch_request_json,omitempty"`
	EvictionGrace int64  `json:"eviction_grace_period_in_ms"`
}

// Write (re)writes the bucket under dir: each model's files and the config.
func Write(dir string) error {
	var entries []configEntry
	for _, m := range Models() {
		files, err := m.Build()
		if err != nil {
			return fmt.Errorf("build %s: %w", m.Path, err)
		}
		root := filepath.Join(dir, filepath.FromSlash(m.Path))
		if err := os.RemoveAll(root); err != nil {
			return err
		}
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(root, filepath.FromSlash(n))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, files[n], 0o644); err != nil {
				return err
			}
		}
		sum, err := modelfiles.ChecksumPath(root)
		if err != nil {
			return err
		}
		entries = append(entries, configEntry{ModelPath: m.Path, Checksum: sum, WarmUp: m.WarmUp, EvictionGrace: 5000})
	}
	cfg, err := json.MarshalIndent(map[string]any{"model_metadata": entries}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ConfigName), append(cfg, '\n'), 0o644)
}
