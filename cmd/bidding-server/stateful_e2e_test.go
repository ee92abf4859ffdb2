package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestStatefulSequenceEndToEnd runs OpenVINO Model Server's REST example
// flow for stateful models (start with an id, a request in the middle, the
// end) against the real binaries: bidding-server, the TensorFlow sidecar
// and the committed running-sum model as a stateful model.
func TestStatefulSequenceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	s := startBiddingServer(t, server, []string{"--inference_sidecar_binary_path", sidecarBin}, []string{
		"INFERENCE_MODEL_LOCAL_PATHS=sum/1/=" + filepath.Join(root, "kserve/testdata/stateful/sum/1"),
		`INFERENCE_SIDECAR_RUNTIME_CONFIG={"stateful_models": {"sum/1/": {"stateful": true, "max_sequence_number": 10}}}`,
	})
	defer s.stop(t)
	predict := s.url + "/v1/models/sum:predict"
	for i, step := range []struct {
		body, want string
	}{
		{`{"signature_name": "serving_default", "inputs": {"x": [1.5], "sequence_control_input": [1], "sequence_id": [10]}}`, `{"outputs":{"sum":[1.5],"sequence_id":[10]}}`},
		{`{"signature_name": "serving_default", "inputs": {"x": [2], "sequence_id": [10]}}`, `{"outputs":{"sum":[3.5],"sequence_id":[10]}}`},
		{`{"signature_name": "serving_default", "inputs": {"x": [3], "sequence_control_input": [2], "sequence_id": [10]}}`, `{"outputs":{"sum":[6.5],"sequence_id":[10]}}`},
	} {
		code, b := post(t, predict, step.body)
		if code != 200 || strings.TrimSpace(b) != step.want {
			t.Fatalf("step %d: %d %s, want %s", i, code, b, step.want)
		}
	}
	code, b := post(t, predict, `{"inputs": {"x": [1], "sequence_id": [10]}}`)
	var e struct{ Error string }
	if code != 404 || json.Unmarshal([]byte(b), &e) != nil || !strings.Contains(e.Error, "Sequence with a provided ID does not exist.") {
		t.Fatalf("after the end: %d %s, want 404 naming the seed's message", code, b)
	}
	code, b = post(t, predict, `{"inputs": {"x": [4], "sequence_control_input": [1]}}`)
	if code != 200 || !strings.Contains(b, `"sum":[4]`) || strings.Contains(b, `"sequence_id":[0]`) {
		t.Fatalf("start without id: %d %s", code, b)
	}
}
