package modelstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
)

// TestErrConfigTellsConfigFromModelFailures: a caller (the bidding server's
// readiness) must tell "no config read, nothing attempted" from "some model
// failed", while messages and error types stay as they were.
func TestErrConfigTellsConfigFromModelFailures(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	err := e.sync()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), e.opts.ConfigPath) {
		t.Fatalf("missing config: SyncOnce = %v, want ErrConfig naming %s", err, e.opts.ConfigPath)
	}
	if strings.Contains(err.Error(), ErrConfig.Error()) {
		t.Errorf("the marker leaked into the message: %v", err)
	}

	good := e.putModel("good/", tfModel(t, "g"))
	e.putModel("bad/", tfModel(t, "b"))
	e.putConfig(cfgEntry{path: "good/", checksum: good}, cfgEntry{path: "bad/", checksum: good})
	err = e.sync()
	if err == nil || errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("config read, one model broken: SyncOnce = %v, want a checksum error that is not ErrConfig", err)
	}
	e.expectCalls("register good/")

	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[`))
	err = e.sync() // bad/ is retried under the last good config, and fails again
	if !errors.Is(err, ErrConfig) || inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("broken config: SyncOnce = %v, want ErrConfig, INPUT_PARSING and bad/'s failure", err)
	}
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", reasonParse); got != 1 {
		t.Errorf("fetches{config,parse_error} = %v, want 1 (the reason survives the marker)", got)
	}
}
