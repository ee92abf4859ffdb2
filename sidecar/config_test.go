package sidecar

import (
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sidecar/registry"
)

func TestParseRuntimeConfigDynamicBatching(t *testing.T) {
	cfg, err := ParseRuntimeConfig(`{"num_intraop_threads":1,"dynamic_batching":{"default":{"max_batch_size":64,"max_delay_us":200},
		"models":{"pctr/v1/":{"max_batch_size":32,"max_delay_us":100},"pcvr/v1/":{},"x/":null}}}`)
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.DynamicBatching
	for path, want := range map[string]registry.BatchSettings{
		"pctr/v1/":  {MaxBatchSize: 32, MaxDelayMicros: 100},
		"pcvr/v1/":  {}, // listed: its own settings (off), nothing inherited
		"x/":        {},
		"other/v1/": {MaxBatchSize: 64, MaxDelayMicros: 200},
	} {
		if got := db.For(path); got != want {
			t.Errorf("settings for %q = %+v, want %+v", path, got, want)
		}
	}
	if got := db.For("pctr/v1/").MaxDelay(); got != 100*time.Microsecond {
		t.Errorf("MaxDelay = %v", got)
	}
	for _, in := range []string{``, `{}`, `{"dynamic_batching":null}`, `{"dynamic_batching":{}}`, `{"dynamic_batching":{"default":{}}}`} {
		cfg, err := ParseRuntimeConfig(in)
		if err != nil || cfg.DynamicBatching.For("m/").On() {
			t.Errorf("ParseRuntimeConfig(%s) = %+v, %v; want batching off", in, cfg.DynamicBatching, err)
		}
	}
	for in, frag := range map[string]string{
		`{"dynamic_batching":5}`:                                                                 "dynamic_batching: want a JSON object, got 5",
		`{"dynamic_batching":{"defaults":{}}}`:                                                   `dynamic_batching: json: unknown field "defaults"`,
		`{"dynamic_batching":{"default":{"max_batch":64}}}`:                                      `dynamic_batching.default: json: unknown field "max_batch"`,
		`{"dynamic_batching":{"default":{"max_batch_size":"64","max_delay_us":1}}}`:              "dynamic_batching.default: json: cannot unmarshal string into Go struct field BatchSettings.max_batch_size",
		`{"dynamic_batching":{"default":{"max_batch_size":1,"max_delay_us":5}}}`:                 "dynamic_batching.default.max_batch_size is 1, want 2..65536",
		`{"dynamic_batching":{"default":{"max_batch_size":-2,"max_delay_us":5}}}`:                "dynamic_batching.default.max_batch_size is -2",
		`{"dynamic_batching":{"default":{"max_batch_size":65537,"max_delay_us":5}}}`:             "max_batch_size is 65537",
		`{"dynamic_batching":{"default":{"max_batch_size":8}}}`:                                  "dynamic_batching.default: max_batch_size is set but max_delay_us is not",
		`{"dynamic_batching":{"models":{"a/":{"max_delay_us":50}}}}`:                             `dynamic_batching.models["a/"]: max_delay_us is set but max_batch_size is not`,
		`{"dynamic_batching":{"models":{"a/":{"max_batch_size":8,"max_delay_us":100001}}}}`:      `dynamic_batching.models["a/"].max_delay_us is 100001, want 1..100000`,
		`{"dynamic_batching":{"models":{"a/":{"max_batch_size":8,"max_delay_us":-1}}}}`:          `max_delay_us is -1`,
		`{"dynamic_batching":{"models":{"a/":{"max_batch_size":8,"max_delay_us":1.5}}}}`:         `dynamic_batching.models["a/"]: json: cannot unmarshal number 1.5`,
		`{"dynamic_batching":{"models":{"a/":7}}}`:                                               `dynamic_batching.models["a/"]: want a JSON object, got 7`,
		`{"dynamic_batching":{"models":{"":{}}}}`:                                                `dynamic_batching.models[""]: the model path is empty`,
		`{"dynamic_batching":{"models":[]}}`:                                                     "dynamic_batching: json: cannot unmarshal array",
		`{"dynamic_batching":{"default":{"max_batch_size":8,"max_delay_us":10,"enabled":true}}}`: `unknown field "enabled"`,
	} {
		_, err := ParseRuntimeConfig(in)
		if err == nil || inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), frag) {
			t.Errorf("ParseRuntimeConfig(%s) = %v, want INPUT_PARSING containing %q", in, err, frag)
		}
	}
}

// TestParseRuntimeConfigIntraopThreads checks num_intraop_threads: 0
// (absent) means the runtime's default, 1 and N are kept, negative is an
// INPUT_PARSING error naming the field.
func TestParseRuntimeConfigIntraopThreads(t *testing.T) {
	for in, want := range map[string]int{``: 0, `{}`: 0, `{"num_intraop_threads":0}`: 0, `{"num_intraop_threads":1}`: 1, `{"num_intraop_threads":6}`: 6} {
		cfg, err := ParseRuntimeConfig(in)
		if err != nil || cfg.NumIntraopThreads != want {
			t.Errorf("ParseRuntimeConfig(%s) = %d, %v; want %d", in, cfg.NumIntraopThreads, err, want)
		}
	}
	_, err := ParseRuntimeConfig(`{"num_intraop_threads":-1}`)
	if err == nil || inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "num_intraop_threads is -1") {
		t.Errorf("num_intraop_threads -1: %v", err)
	}
}

// The runtime config is one flat JSON object whose keys land in three
// parts: the runtimes' runtimes.Config, the registry's registry.Settings
// and the process's cpuset. Every key reaches its part; an unknown key
// (at the top level too), or a key of the mapped-variables flags, is
// refused as before the split.
func TestParseRuntimeConfigParts(t *testing.T) {
	cfg, err := ParseRuntimeConfig(`{"num_interop_threads":2,"num_intraop_threads":3,"fused_multiply_add":true,
		"output_names":"signature_key","module_name":"tensorflow","cpuset":[0,1],"model_reset_probability":0.5,
		"shared_state_models":["s/"],"library_path":"/x.so","max_tensor_elements":99,
		"dynamic_batching":{"default":{"max_batch_size":4,"max_delay_us":10}},
		"stateful_models":{"q/":{"stateful":true}},"sequence_cleaner_poll_wait_minutes":2}`)
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Config
	if rc.NumInteropThreads != 2 || rc.NumIntraopThreads != 3 || !rc.FusedMultiplyAdd || rc.OutputNames != "signature_key" ||
		rc.ModuleName != "tensorflow" || rc.ModelResetProbability != 0.5 || rc.LibraryPath != "/x.so" || rc.MaxTensorElements != 99 {
		t.Errorf("runtimes.Config = %+v", rc)
	}
	s := cfg.Settings
	if len(s.SharedStateModels) != 1 || s.SharedStateModels[0] != "s/" || s.DynamicBatching.For("m/").MaxBatchSize != 4 ||
		!s.StatefulModels["q/"].Stateful || s.SequenceCleanerPollWait() != 2*time.Minute {
		t.Errorf("registry.Settings = %+v", s)
	}
	if len(cfg.Cpuset) != 2 || cfg.Cpuset[1] != 1 {
		t.Errorf("Cpuset = %v", cfg.Cpuset)
	}
	for _, js := range []string{`{"cpu_set":[0]}`, `{"MapVariablesDir":"/tmp"}`, `{"map_variables_dir":"/tmp"}`, `{"Settings":{}}`, `{"Config":{}}`} {
		_, err := ParseRuntimeConfig(js)
		if err == nil || inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("ParseRuntimeConfig(%s) = %v, want INPUT_PARSING naming the unknown field", js, err)
		}
	}
}
