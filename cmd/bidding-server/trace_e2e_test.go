package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// otlpSpan is one span as a test OTLP receiver got it.
type otlpSpan struct {
	service, name     string
	trace, id, parent string
	attrs             map[string]string
}

// otlpReceiver is a minimal OTLP/HTTP collector (POST /v1/traces,
// protobuf) on 127.0.0.1, decoding with the official OTLP protos: every
// process of the server (bidding-server, its JS workers, the sidecar)
// exports to it as it would to a real collector.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
			t.Errorf("OTLP receiver: %s %s: %v", req.Method, req.URL.Path, err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			service := attrString(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					sp := otlpSpan{service: service, name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()),
						id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()), attrs: map[string]string{}}
					for _, a := range s.GetAttributes() {
						sp.attrs[a.GetKey()] = anyString(a.GetValue())
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) got() []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...)
}

func attrString(attrs []*commonpb.KeyValue, key string) string {
	for _, a := range attrs {
		if a.GetKey() == key {
			return anyString(a.GetValue())
		}
	}
	return ""
}

func anyString(v *commonpb.AnyValue) string {
	b, _ := json.Marshal(v) // every kind, as text: the privacy check reads it all
	return string(b)
}

// TestTraceOfGenerateBids: one generateBids request with two interest
// groups, through the real binaries (bidding-server, JS worker processes,
// the TensorFlow sidecar) exporting over OTLP/HTTP to a receiver on
// 127.0.0.1, is one trace: generateBids (bidding-server) → generateBid ×2
// (js-worker) → runInference (js-worker) → sidecar.Predict →
// model.run ×2 each (the sidecar); with --js_in_process the same, the JS
// spans from bidding-server. No span carries request data. /metrics has the
// per-model histograms of both sides.
func TestTraceOfGenerateBids(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	for _, mode := range []struct {
		name, jsService string
		args            []string
	}{
		{"workers", "js-worker", []string{"--js_workers", "2"}},
		{"in-process", "bidding-server", []string{"--js_in_process"}},
	} {
		t.Run(mode.name, func(t *testing.T) { traceOfGenerateBids(t, root, server, sidecarBin, mode.jsService, mode.args) })
	}
}

func traceOfGenerateBids(t *testing.T, root, server, sidecarBin, jsService string, args []string) {
	recv := startOTLPReceiver(t)
	s := startBiddingServer(t, server, append([]string{
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
		"--otel_exporter_endpoint", recv.srv.URL,
	}, args...), []string{"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_EXPORTER_OTLP_ENDPOINT="}) // the flag alone reaches workers and sidecar

	raw, err := os.ReadFile(filepath.Join(root, "examples/bidding/request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	var groups []json.RawMessage
	json.Unmarshal(req["interest_groups"], &groups)
	req["interest_groups"], _ = json.Marshal(groups[:2])
	body, _ := json.Marshal(req)
	code, resp := post(t, s.url+"/v1/generateBids", string(body))
	var r bidsResponse
	if code != 200 || json.Unmarshal([]byte(resp), &r) != nil || len(r.Bids) != 2 || r.Bids[0].Error != "" || r.Bids[1].Error != "" {
		t.Fatalf("generateBids: %d %s", code, resp)
	}

	// The spans of the request's trace, once every process has exported.
	var spans []otlpSpan
	byName := map[string][]otlpSpan{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		spans = recv.got()
		clear(byName)
		var top *otlpSpan
		for i, sp := range spans {
			if sp.name == "generateBids" {
				top = &spans[i]
			}
		}
		if top != nil {
			for _, sp := range spans {
				if sp.trace == top.trace {
					byName[sp.name] = append(byName[sp.name], sp)
				}
			}
		}
		if len(byName["generateBid"]) == 2 && len(byName["runInference"]) == 2 &&
			len(byName["sidecar.Predict"]) == 2 && len(byName["model.run"]) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of the request's trace: %v; all spans: %+v", counts(byName), spans)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(byName["generateBids"]); n != 1 {
		t.Errorf("%d generateBids spans in the trace", n)
	}
	top := byName["generateBids"][0]
	ids := map[string]otlpSpan{}
	for _, list := range byName {
		for _, sp := range list {
			ids[sp.id] = sp
		}
	}
	parentOf := func(sp otlpSpan) string { return ids[sp.parent].name }
	wantService := map[string]string{"generateBids": "bidding-server", "generateBid": jsService, "runInference": jsService,
		"sidecar.Predict": "inference-sidecar-tensorflow", "model.run": "inference-sidecar-tensorflow"}
	wantParent := map[string]string{"generateBid": "generateBids", "runInference": "generateBid", "sidecar.Predict": "runInference", "model.run": "sidecar.Predict"}
	for name, list := range byName {
		for _, sp := range list {
			if got := strings.Trim(sp.service, `{}"`); !strings.Contains(sp.service, wantService[name]) {
				t.Errorf("span %s from service %s, want %s", name, got, wantService[name])
			}
			if want := wantParent[name]; want != "" && parentOf(sp) != want {
				t.Errorf("span %s has parent %q, want %s", name, parentOf(sp), want)
			}
			// Privacy: nothing of the request (interest group names,
			// their signals, the ads) in any attribute.
			for k, v := range sp.attrs {
				for _, secret := range []string{"running-shoes", "coffee", "ads.example", "0.9", "dense"} {
					if strings.Contains(v, secret) {
						t.Errorf("span %s attribute %s=%s carries request data (%q)", name, k, v, secret)
					}
				}
			}
		}
	}
	if top.parent != "" {
		t.Errorf("generateBids has a parent %s: the request sent no traceparent", top.parent)
	}
	paths := map[string]int{}
	for _, sp := range byName["model.run"] {
		paths[sp.attrs["inferbid.model_path"]]++
	}
	if paths[`{"Value":{"StringValue":"pctr/v2/"}}`] != 2 || paths[`{"Value":{"StringValue":"pcvr/v1/"}}`] != 2 {
		t.Errorf("model.run model paths: %v", paths)
	}

	// /metrics: the host's end-to-end histogram and the sidecar's stages.
	_, metrics := get(t, s.url+"/metrics")
	for _, want := range []string{
		`inferbid_inference_model_duration_seconds_count{model_path="pctr/v2/"} 2`,
		`inferbid_sidecar_model_duration_seconds_count{model_path="pctr/v2/",stage="end_to_end"} 2`,
		`inferbid_sidecar_model_duration_seconds_count{model_path="pctr/v2/",stage="queue"} 2`,
		`inferbid_sidecar_model_duration_seconds_count{model_path="pcvr/v1/",stage="compute"} 2`,
		`inferbid_sidecar_model_batch_size_count{model_path="pcvr/v1/"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("spans: %+v", spans)
	}
	s.stop(t)
}

func counts(m map[string][]otlpSpan) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}
