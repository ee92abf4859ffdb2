package modelstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
)

const sum1 = "dd94b3b08ea19b4240aa5e5f68ff0447b40e37ebdd06cc76fa1a2cf61143a10c"

func TestParseConfigSeedExamples(t *testing.T) {
	// The seed documentation's examples, trailing commas included.
	data := `{
  "model_metadata": [
    {
      "model_path": "pcvr_v1/",
      "checksum": "` + sum1 + `",
      "eviction_grace_period_in_ms": 60000,
      "warm_up_batch_request_json": "{\"request\":[]}",
    },
    {"model_path": "pctr/model.pt", "checksum": "", "eviction_grace_period_in_ms": "500"},
  ]
}`
	cfg, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelEntry{
		{Path: "pcvr_v1/", Checksum: sum1, WarmUpJSON: `{"request":[]}`, EvictionGrace: time.Minute},
		{Path: "pctr/model.pt", EvictionGrace: 500 * time.Millisecond},
	}
	if len(cfg.Models) != len(want) {
		t.Fatalf("got %d models, want %d", len(cfg.Models), len(want))
	}
	for i := range want {
		if cfg.Models[i] != want[i] {
			t.Errorf("model %d = %+v, want %+v", i, cfg.Models[i], want[i])
		}
	}
	if !cfg.Models[0].IsDir() || cfg.Models[1].IsDir() {
		t.Error("IsDir wrong")
	}
}

func TestParseConfigAcceptsProtoJSONForms(t *testing.T) {
	data := `{"modelMetadata":[{"modelPath":"m/","checksum":"` + strings.ToUpper(sum1) + `","evictionGracePeriodInMs":1e3,"warmUpBatchRequestJson":null}]}`
	cfg, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Models[0]; got.Path != "m/" || got.Checksum != sum1 || got.EvictionGrace != time.Second {
		t.Errorf("got %+v", got)
	}
	for _, empty := range []string{`{}`, `{"model_metadata":[]}`, `{"model_metadata":null}`, " {\"model_metadata\":[ ]}\n"} {
		cfg, err := ParseConfig([]byte(empty))
		if err != nil || len(cfg.Models) != 0 {
			t.Errorf("ParseConfig(%s) = %+v, %v; want no models", empty, cfg, err)
		}
	}
}

func TestParseConfigErrorsNameEntryAndField(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{``, "end of JSON"},
		{`not json`, "invalid JSON"},
		{`[]`, "want a JSON object"},
		{`{"model_metadata":{}}`, "model_metadata: want an array"},
		{`{"models":[]}`, `unknown field "models"`},
		{`{"model_metadata":[],"model_metadata":[]}`, `duplicate field "model_metadata"`},
		{`{"model_metadata":[]} {}`, "trailing data"},
		{`{"model_metadata":[1]}`, "model_metadata[0]: want an object"},
		{`{"model_metadata":[{"checksum":""}]}`, "model_metadata[0]: model_path is missing"},
		{`{"model_metadata":[{"model_path":""}]}`, "model_metadata[0]: model_path is missing"},
		{`{"model_metadata":[{"model_path":7}]}`, "model_path: want a string"},
		{`{"model_metadata":[{"model_path":["a"]}]}`, "model_path: want a string, got an array"},
		{`{"model_metadata":[{"model_path":"a","path":"b"}]}`, `model_metadata[0] ("a"): unknown field "path"`},
		{`{"model_metadata":[{"model_path":"a","model_path":"b"}]}`, `duplicate field "model_path"`},
		{`{"model_metadata":[{"model_path":"a","checksum":"abc"}]}`, `model_metadata[0] ("a"): checksum: want 64 hex digits`},
		{`{"model_metadata":[{"model_path":"a","checksum":"` + strings.Repeat("g", 64) + `"}]}`, "checksum: want 64 hex digits"},
		{`{"model_metadata":[{"model_path":"a","eviction_grace_period_in_ms":-1}]}`, "eviction_grace_period_in_ms: must not be negative"},
		{`{"model_metadata":[{"model_path":"a","eviction_grace_period_in_ms":1.5}]}`, "eviction_grace_period_in_ms: want a whole number"},
		{`{"model_metadata":[{"model_path":"a","eviction_grace_period_in_ms":"soon"}]}`, "want a whole number"},
		{`{"model_metadata":[{"model_path":"a","eviction_grace_period_in_ms":3000000000}]}`, "out of range"},
		{`{"model_metadata":[{"model_path":"a","eviction_grace_period_in_ms":1e300}]}`, "out of range"},
		{`{"model_metadata":[{"model_path":"a","eviction_grace_period_in_ms":true}]}`, "want a number of milliseconds"},
		{`{"model_metadata":[{"model_path":"a","warm_up_batch_request_json":"{"}]}`, "warm_up_batch_request_json is not valid JSON"},
		{`{"model_metadata":[{"model_path":"a","warm_up_batch_request_json":{"request":[]}}]}`, "warm_up_batch_request_json: want a string, got an object"},
		{`{"model_metadata":[{"model_path":"a/"},{"model_path":"b"},{"model_path":"a/"}]}`, `model_metadata[2]: model_path "a/" is also model_metadata[0]`},
		{`{"model_metadata":[{"model_path":"a"}`, "end of JSON"},
	} {
		_, err := ParseConfig([]byte(tc.data))
		if err == nil {
			t.Errorf("ParseConfig(%s) succeeded, want an error with %q", tc.data, tc.want)
			continue
		}
		if inferr.TypeOf(err) != inferr.InputParsing {
			t.Errorf("ParseConfig(%s): error type %v, want INPUT_PARSING", tc.data, inferr.TypeOf(err))
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) = %q, want it to contain %q", tc.data, err, tc.want)
		}
	}
}

func TestParseConfigSizeLimit(t *testing.T) {
	big := make([]byte, MaxConfigBytes+1)
	if _, err := ParseConfig(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("ParseConfig(oversized) = %v, want a size error", err)
	}
}

func TestStripTrailingCommas(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":[1,2,],}`:      `{"a":[1,2]}`,
		`[1 , ]`:             `[1  ]`,
		`{"s":",]",}`:        `{"s":",]"}`,
		`{"s":"\",}",}`:      `{"s":"\",}"}`,
		"[1,\n\t]":           "[1\n\t]",
		`[1,2]`:              `[1,2]`,
		`{"s":"\\",}`:        `{"s":"\\"}`,
		`[",", ",]" , "x",]`: `[",", ",]" , "x"]`,
	} {
		if got := string(stripTrailingCommas([]byte(in))); got != want {
			t.Errorf("stripTrailingCommas(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzParseConfig: never panics; what it accepts satisfies the invariants
// the watcher relies on.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"model_metadata":[{"model_path":"a/","checksum":"` + sum1 + `","eviction_grace_period_in_ms":5,"warm_up_batch_request_json":"{}"},]}`))
	f.Add([]byte(`{"modelMetadata":[{"modelPath":"x","evictionGracePeriodInMs":"7"}]}`))
	f.Add([]byte(`{"model_metadata":[{"model_path":"a"},{"model_path":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if inferr.TypeOf(err) != inferr.InputParsing {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, m := range cfg.Models {
			if m.Path == "" || seen[m.Path] {
				t.Fatalf("empty or duplicate path %q", m.Path)
			}
			seen[m.Path] = true
			if m.Checksum != "" && (len(m.Checksum) != 64 || strings.ToLower(m.Checksum) != m.Checksum) {
				t.Fatalf("checksum %q not normalized", m.Checksum)
			}
			if m.EvictionGrace < 0 {
				t.Fatalf("negative grace")
			}
			if m.WarmUpJSON != "" && !json.Valid([]byte(m.WarmUpJSON)) {
				t.Fatalf("invalid warm-up accepted")
			}
		}
	})
}

// FuzzStripTrailingCommas: valid JSON is never changed, and what comes out
// is never longer.
func FuzzStripTrailingCommas(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,],}`))
	f.Add([]byte(`{"s":"\",}"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := stripTrailingCommas(append([]byte(nil), data...))
		if len(out) > len(data) {
			t.Fatalf("grew")
		}
		if json.Valid(data) && string(out) != string(data) {
			t.Fatalf("changed valid JSON %q to %q", data, out)
		}
	})
}

func TestFuzzSeedCorpusExists(t *testing.T) {
	for _, name := range []string{"FuzzParseConfig", "FuzzStripTrailingCommas"} {
		if _, err := os.Stat(filepath.Join("testdata", "fuzz", name)); err != nil {
			t.Errorf("seed corpus for %s: %v", name, err)
		}
	}
}
