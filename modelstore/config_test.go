package modelstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/varstore"
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

// TestParseConfigRejectsWholeConfig: what is not valid JSON, or wrong at
// the top level, rejects the config: nothing of it may apply.
func TestParseConfigRejectsWholeConfig(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{``, "end of JSON"},
		{`not json`, "invalid JSON"},
		{`[]`, "want a JSON object"},
		{`{"model_metadata":{}}`, "model_metadata: want an array"},
		{`{"models":[]}`, `unknown field "models"`},
		{`{"model_metadata":[],"model_metadata":[]}`, `duplicate field "model_metadata"`},
		{`{"model_metadata":[]} {}`, "trailing data"},
		{`{"model_metadata":[{"model_path":"a"}`, "end of JSON"},
		{`{"model_metadata":[{"model_path":"a"},{"model_path":"b"]}`, "invalid JSON"},
		{`{"model_metadata":[{"model_path":"a"}, nope]}`, "invalid JSON"},
		{`{"model_metadata":[{"model_path":"a","checksum":"abc"},{"model_path":"b" "x"}]}`, "invalid JSON"},
	} {
		cfg, err := ParseConfig([]byte(tc.data))
		if err == nil {
			t.Errorf("ParseConfig(%s) = %+v, want an error with %q", tc.data, cfg, tc.want)
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

// TestParseConfigRejectsBadEntriesAlone: an entry that is valid JSON but
// not a valid entry is rejected alone, naming the entry and the field and
// keeping the model_path it names; the valid entry beside it stays.
func TestParseConfigRejectsBadEntriesAlone(t *testing.T) {
	for _, tc := range []struct{ entry, want, path string }{
		{`1`, "model_metadata[0]: want an object, got the number 1", ""},
		{`null`, "model_metadata[0]: want an object, got null", ""},
		{`{"checksum":""}`, "model_metadata[0]: model_path is missing", ""},
		{`{"model_path":""}`, "model_metadata[0]: model_path is missing", ""},
		{`{"model_path":7}`, "model_path: want a string", ""},
		{`{"model_path":["a"]}`, "model_path: want a string, got an array", ""},
		{`{"model_path":"a","path":"b"}`, `model_metadata[0] ("a"): unknown field "path"`, "a"},
		{`{"path":"b","model_path":"a"}`, `model_metadata[0] ("a"): unknown field "path"`, "a"},
		{`{"model_path":"a","model_path":"b"}`, `duplicate field "model_path"`, "a"},
		{`{"model_path":"a","checksum":"abc"}`, `model_metadata[0] ("a"): checksum: want 64 hex digits`, "a"},
		{`{"checksum":"` + strings.Repeat("g", 64) + `","model_path":"a"}`, `model_metadata[0] ("a"): checksum: want 64 hex digits`, "a"},
		{`{"model_path":"a","eviction_grace_period_in_ms":-1}`, "eviction_grace_period_in_ms: must not be negative", "a"},
		{`{"model_path":"a","eviction_grace_period_in_ms":1.5}`, "eviction_grace_period_in_ms: want a whole number", "a"},
		{`{"model_path":"a","eviction_grace_period_in_ms":"soon"}`, "want a whole number", "a"},
		{`{"model_path":"a","eviction_grace_period_in_ms":3000000000}`, "out of range", "a"},
		{`{"model_path":"a","eviction_grace_period_in_ms":1e300}`, "out of range", "a"},
		{`{"eviction_grace_period_in_ms":true,"model_path":"a"}`, `model_metadata[0] ("a"): eviction_grace_period_in_ms: want a number of milliseconds`, "a"},
		{`{"model_path":"a","warm_up_batch_request_json":"{"}`, "warm_up_batch_request_json is not valid JSON", "a"},
		{`{"model_path":"a","warm_up_batch_request_json":{"request":[]}}`, "warm_up_batch_request_json: want a string, got an object", "a"},
		{`{"model_path":"a","max_sequence_number":3}`, `model_metadata[0] ("a"): max_sequence_number is set but stateful is not true`, "a"},
		{`{"model_path":"a","stateful":false,"idle_sequence_cleanup":false}`, `model_metadata[0] ("a"): idle_sequence_cleanup is set but stateful is not true`, "a"},
		{`{"lowLatencyTransformation":true,"model_path":"a"}`, `model_metadata[0] ("a"): low_latency_transformation is set but stateful is not true`, "a"},
		{`{"model_path":"a","stateful":true,"max_sequence_number":0}`, `model_metadata[0] ("a"): max_sequence_number is 0`, "a"},
		{`{"model_path":"a","stateful":true,"max_sequence_number":-1}`, `model_metadata[0] ("a"): max_sequence_number: want an integer from 1 to 4294967295, got -1`, "a"},
		{`{"model_path":"a","stateful":true,"max_sequence_number":4294967296}`, `max_sequence_number: want an integer from 1`, "a"},
		{`{"model_path":"a","stateful":true,"max_sequence_number":true}`, `max_sequence_number: want a number, got`, "a"},
		{`{"model_path":"a","stateful":"yes"}`, `model_metadata[0] ("a"): stateful: want true or false`, "a"},
		{`{"model_path":"a","stateful":{}}`, `stateful: want a boolean, got an object`, "a"},
		{`{"model_path":"` + strings.Repeat("p", 1000) + `","checksum":"abc"}`, strings.Repeat("p", 200) + `... (1000 bytes)"): checksum`, strings.Repeat("p", 1000)},
	} {
		data := `{"model_metadata":[` + tc.entry + `,{"model_path":"ok/","eviction_grace_period_in_ms":5},]}`
		cfg, err := ParseConfig([]byte(data))
		if err != nil {
			t.Errorf("ParseConfig(%s) = %v, want the entry rejected alone", data, err)
			continue
		}
		if len(cfg.Models) != 1 || cfg.Models[0] != (ModelEntry{Path: "ok/", EvictionGrace: 5 * time.Millisecond}) {
			t.Errorf("ParseConfig(%s): models %+v, want ok/ alone", data, cfg.Models)
		}
		if len(cfg.Invalid) != 1 {
			t.Errorf("ParseConfig(%s): invalid %+v, want one entry", data, cfg.Invalid)
			continue
		}
		ie := cfg.Invalid[0]
		if ie.Index != 0 || ie.Path != tc.path || inferr.TypeOf(ie.Err) != inferr.InputParsing || !strings.Contains(ie.Error(), tc.want) {
			t.Errorf("ParseConfig(%s): rejected %d %q: %v (type %v), want 0 %q: INPUT_PARSING containing %q",
				data, ie.Index, ie.Path, ie.Err, inferr.TypeOf(ie.Err), tc.path, tc.want)
		}
		if err := cfg.Err(); err == nil || !strings.Contains(err.Error(), tc.want) || inferr.TypeOf(err) != inferr.InputParsing {
			t.Errorf("ParseConfig(%s): Err() = %v", data, err)
		}
	}
}

// The stateful-model settings of an entry, in both JSON spellings; null is
// absent, and an entry without them has none (nil).
func TestParseConfigSequenceSettings(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_metadata":[
		{"model_path":"s/","stateful":true,"max_sequence_number":"7","idleSequenceCleanup":false,"low_latency_transformation":true},
		{"model_path":"off/","stateful":false},
		{"model_path":"plain/","maxSequenceNumber":null}]}`))
	if err != nil || len(cfg.Models) != 3 {
		t.Fatalf("ParseConfig: %v %+v", err, cfg)
	}
	s := cfg.Models[0].Sequences
	if s == nil || !s.Stateful || s.MaxSequenceNumber == nil || *s.MaxSequenceNumber != 7 || s.IdleSequenceCleanup == nil || *s.IdleSequenceCleanup ||
		s.LowLatencyTransformation == nil || !*s.LowLatencyTransformation {
		t.Errorf("s/: %+v", s)
	}
	if s := cfg.Models[1].Sequences; s == nil || s.Stateful || s.MaxSequenceNumber != nil {
		t.Errorf("off/: %+v, want stateful false given", s)
	}
	if cfg.Models[2].Sequences != nil {
		t.Errorf("plain/: %+v, want none", cfg.Models[2].Sequences)
	}
}

// TestParseConfigRejectsEveryEntryOfADuplicatePath: which of two entries
// for one path was meant cannot be told, so neither applies, whether the
// other is valid or not.
// external_variables: an object of checkpoint variable -> store URL, in
// either JSON name form; anything else rejects the entry alone, naming the
// entry, the field and the variable.
func TestParseConfigExternalVariables(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_metadata":[
		{"model_path":"a/","external_variables":{"emb/t":"redis-cluster://127.0.0.1:7000,h:7001","b":"redis-cluster://x:1"}},
		{"model_path":"b/","externalVariables":{}},
		{"model_path":"c/","external_variables":null},
		{"model_path":"d/","external_variables":{"emb":"redis://x:1"}},
		{"model_path":"e/","external_variables":"redis-cluster://x:1"},
		{"model_path":"f/","external_variables":{"":"redis-cluster://x:1"}},
		{"model_path":"g/","external_variables":{"emb":7}},
		{"model_path":"h/","external_variables":{"emb":"redis-cluster://x:1","emb":"redis-cluster://x:2"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 3 {
		t.Fatalf("%d valid entries, want 3 (a, b, c): %v", len(cfg.Models), cfg.Err())
	}
	want := map[string]string{"emb/t": "redis-cluster://127.0.0.1:7000,h:7001", "b": "redis-cluster://x:1"}
	if got := cfg.Models[0].ExternalVariables.Map(); !maps.Equal(got, want) {
		t.Errorf("a/: %v, want %v", got, want)
	}
	if cfg.Models[1].ExternalVariables != "" || cfg.Models[2].ExternalVariables != "" {
		t.Errorf("empty and null external_variables: %q, %q; want none", cfg.Models[1].ExternalVariables, cfg.Models[2].ExternalVariables)
	}
	for i, w := range []string{`"emb"`, "want an object", "empty variable name", "want a redis-cluster:// URL string, got 7", "named twice"} {
		ie := cfg.Invalid[i]
		if msg := ie.Err.Error(); !strings.Contains(msg, "external_variables") || !strings.Contains(msg, w) || !strings.Contains(msg, ie.Path) || inferr.TypeOf(ie.Err) != inferr.InputParsing {
			t.Errorf("entry %d: %v; want INPUT_PARSING naming the entry, external_variables and %q", ie.Index, ie.Err, w)
		}
	}
}

func TestParseConfigRejectsEveryEntryOfADuplicatePath(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_metadata":[{"model_path":"a/"},{"model_path":"b"},{"model_path":"a/"},
		{"model_path":"c","checksum":"abc"},{"model_path":"c"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].Path != "b" {
		t.Errorf("models %+v, want b alone", cfg.Models)
	}
	want := []struct {
		index      int
		path, text string
	}{
		{0, "a/", `model_metadata[0]: model_path "a/" is also model_metadata[2]`},
		{2, "a/", `model_metadata[2]: model_path "a/" is also model_metadata[0]`},
		{3, "c", `model_metadata[3] ("c"): checksum`},
		{4, "c", `model_metadata[4]: model_path "c" is also model_metadata[3]`},
	}
	if len(cfg.Invalid) != len(want) {
		t.Fatalf("invalid %+v, want %d entries", cfg.Invalid, len(want))
	}
	for i, w := range want {
		if ie := cfg.Invalid[i]; ie.Index != w.index || ie.Path != w.path || !strings.Contains(ie.Error(), w.text) {
			t.Errorf("invalid[%d] = %d %q %v, want %d %q %q", i, ie.Index, ie.Path, ie.Err, w.index, w.path, w.text)
		}
	}
}

// TestConfigErrIsBounded: a config of many bad entries makes a bounded
// message that still counts them all.
func TestConfigErrIsBounded(t *testing.T) {
	var parts []string
	for i := range 1000 {
		parts = append(parts, fmt.Sprintf(`{"model_path":"m%d","checksum":"bad"}`, i))
	}
	cfg, err := ParseConfig([]byte(`{"model_metadata":[` + strings.Join(parts, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Invalid) != 1000 || len(cfg.Models) != 0 {
		t.Fatalf("%d invalid, %d valid", len(cfg.Invalid), len(cfg.Models))
	}
	msg := cfg.Err().Error()
	if n := strings.Count(msg, "\n") + 1; n != maxEntryErrorsShown+1 || !strings.Contains(msg, "980 more entries rejected") {
		t.Errorf("Err() has %d lines, want %d ending in a count: %s", n, maxEntryErrorsShown+1, msg)
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
	f.Add([]byte(`{"model_metadata":[{"checksum":"x","model_path":"a"},{"model_path":"b"},1,{"model_path":"a"}]}`))
	f.Add([]byte(`{"model_metadata":[{"model_path":"a/","external_variables":{"emb/embeddings":"redis-cluster://127.0.0.1:7000,h:7001"}}]}`))
	f.Add([]byte(`{"model_metadata":[{"model_path":"a/","externalVariables":{"":"redis://x:1","e":["x"]}},{"model_path":"b","external_variables":"e"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if inferr.TypeOf(err) != inferr.InputParsing {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		seen := map[string]bool{}
		last := -1
		for _, ie := range cfg.Invalid {
			if ie.Index <= last || inferr.TypeOf(ie.Err) != inferr.InputParsing {
				t.Fatalf("invalid entry %d out of order or untyped: %v", ie.Index, ie.Err)
			}
			last = ie.Index
			if ie.Path != "" {
				seen[ie.Path] = true // a path a rejected entry names is never valid beside it
			}
		}
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
			if m.ExternalVariables != "" {
				ext := m.ExternalVariables.Map()
				if len(ext) == 0 {
					t.Fatalf("external_variables %q does not decode", m.ExternalVariables)
				}
				for name, url := range ext {
					if _, err := varstore.ParseURL(url); name == "" || err != nil {
						t.Fatalf("external_variables[%q] = %q accepted (%v)", name, url, err)
					}
				}
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
