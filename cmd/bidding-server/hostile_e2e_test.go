package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsbridge"
)

// TestHostileScriptsEndToEnd runs hostileModule's scripts through the
// bidding-server binary on its JS workers (default settings but a 300ms
// call deadline): each fails its own bid with a clear error while other
// requests succeed, the server survives, and its own memory stays small.
func TestHostileScriptsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	const callTimeout = 300 * time.Millisecond
	bin := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	udf := filepath.Join(t.TempDir(), "hostile.js")
	if err := os.WriteFile(udf, []byte(hostileModule), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startBiddingServer(t, bin, []string{"--udf_code_path", udf, "--js_call_timeout", callTimeout.String()}, nil)
	pid := s.cmd.Process.Pid
	ordinary := `{"interest_groups":[{"name":"a","value":1},{"name":"b","value":2},{"name":"c","value":3}]}`
	checkOrdinary := func(code int, body string) error {
		var r bidsResponse
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Bids) != 3 {
			return fmt.Errorf("%d %.300s", code, body)
		}
		for i, b := range r.Bids {
			if want := fmt.Sprintf(`{"bid":%d}`, 499500*(i+1)); b.Error != "" || string(b.Bid) != want {
				return fmt.Errorf("group %d: %+v, want bid %s", i, b, want)
			}
		}
		return nil
	}
	hostile := func(t *testing.T, name string) (time.Duration, bidsResponse) {
		t.Helper()
		start := time.Now()
		code, body := post(t, s.url+"/v1/generateBids", oneGroup(name))
		took := time.Since(start)
		var r bidsResponse
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Bids) != 1 {
			t.Fatalf("%s: %d %s", name, code, body)
		}
		return took, r
	}

	// (a) The ArrayBuffer bomb ends its worker (RLIMIT_AS: Go's allocator
	// cannot map 32 GiB) and fails its own bid only: requests running
	// beside it all succeed, the server serves on, and /metrics counts the
	// worker's replacement.
	t.Run("arraybuffer_bomb", func(t *testing.T) {
		restarts0 := metricValue(t, s.url, "inferbid_js_worker_restarts_total")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var good int
		var bad []error
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					code, body, err := tryPost(s.url+"/v1/generateBids", ordinary)
					if err == nil {
						err = checkOrdinary(code, body)
					}
					mu.Lock()
					if err != nil {
						bad = append(bad, err)
					} else {
						good++
					}
					mu.Unlock()
				}
			})
		}
		time.Sleep(100 * time.Millisecond) // they are running
		_, r := hostile(t, "arraybuffer")
		time.Sleep(200 * time.Millisecond) // and go on after it
		close(stop)
		wg.Wait()
		if b := r.Bids[0]; b.Bid != nil || !strings.Contains(b.Error, "JS worker died") {
			t.Errorf("the bomb's bid: %+v, want the error of a worker that died", b)
		}
		if len(bad) > 0 || good == 0 {
			t.Errorf("%d requests beside the bomb succeeded, %d failed, the first: %v", good, len(bad), bad)
		}
		if !s.alive() {
			t.Fatal("bidding-server died")
		}
		if code, body := get(t, s.url+"/healthz"); code != 200 {
			t.Fatalf("/healthz: %d %s", code, body)
		}
		if err := checkOrdinary(post(t, s.url+"/v1/generateBids", ordinary)); err != nil {
			t.Errorf("after the bomb: %v", err)
		}
		waitFor(t, "a worker restart in /metrics", func() bool {
			return metricValue(t, s.url, "inferbid_js_worker_restarts_total") > restarts0
		})
		if v := metricValue(t, s.url, "inferbid_js_worker_deaths_total"); v < 1 {
			t.Errorf("inferbid_js_worker_deaths_total = %v, want at least 1", v)
		}
		// The operator's log names the cause.
		if !strings.Contains(s.log(), "out of memory") {
			t.Errorf("the log does not say the worker ran out of memory:\n%s", s.log())
		}
		t.Logf("%d requests beside the bomb; bomb: %s", good, r.Bids[0].Error)
	})

	// (b) A join stuck in one built-in call gets its deadline error when
	// its deadline, the interrupt's grace and the host's kill grace have
	// passed (a second of slack for a loaded machine), and the server
	// serves on.
	t.Run("stuck_join", func(t *testing.T) {
		killGrace := max(callTimeout/20, 20*time.Millisecond) // jsworker's default
		bound := callTimeout + jsbridge.DefaultInterruptGrace + killGrace + time.Second
		for range 2 {
			took, r := hostile(t, "join")
			if b := r.Bids[0]; b.Bid != nil || !strings.Contains(b.Error, "exceeded its deadline") {
				t.Errorf("join: %+v, want a deadline error", b)
			}
			if took > bound {
				t.Errorf("join answered after %v, want at most %v", took, bound)
			}
			for i := range 5 {
				if err := checkOrdinary(post(t, s.url+"/v1/generateBids", ordinary)); err != nil {
					t.Errorf("request %d after the join: %v", i, err)
				}
			}
		}
	})

	// (c) An async generateBid's value is its bid; one whose promise never
	// settles fails with an error that says so; neither touches the
	// groups beside it.
	t.Run("async", func(t *testing.T) {
		code, body := post(t, s.url+"/v1/generateBids", `{"interest_groups":[{"name":"async"},{"name":"never"},{"name":"ordinary","value":1}]}`)
		var r bidsResponse
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Bids) != 3 {
			t.Fatalf("%d %s", code, body)
		}
		if b := r.Bids[0]; b.Error != "" || string(b.Bid) != `{"bid":7,"async":true}` {
			t.Errorf("async: %+v, want its promise's value as the bid", b)
		}
		if b := r.Bids[1]; b.Bid != nil || !strings.Contains(b.Error, "promise that never settled") {
			t.Errorf("never: %+v, want an error saying the promise never settled", b)
		}
		if b := r.Bids[2]; b.Error != "" || string(b.Bid) != `{"bid":499500}` {
			t.Errorf("the ordinary group beside them: %+v", b)
		}
	})

	// (d) The server process holds no JS heap: after the bombs (32 GiB
	// asked at once; strings doubled to gigabytes; 1 MiB strings pushed up
	// to the 1 GiB heap budget) its resident set, and its peak, stay
	// small. Idle it holds 40-60 MB (the HTTP server, the metrics, the
	// workers' pipes); any one of these bombs landing in it would add at
	// least the 1 GiB budget. 300 MB leaves room for the server's own
	// variation and nothing for a JS heap.
	t.Run("host_rss", func(t *testing.T) {
		for _, name := range []string{"arraybuffer", "double", "push"} {
			if _, r := hostile(t, name); r.Bids[0].Error == "" {
				t.Errorf("%s bid %s", name, r.Bids[0].Bid)
			}
		}
		const bound = 300 << 10 // kB
		rss, hwm := procStatusKB(pid, "VmRSS"), procStatusKB(pid, "VmHWM")
		if rss == 0 || rss > bound || hwm > bound {
			t.Errorf("bidding-server RSS %d kB, peak %d kB after the bombs, want under %d kB", rss, hwm, bound)
		}
		t.Logf("bidding-server RSS %d kB, peak %d kB", rss, hwm)
	})
	if !s.alive() {
		t.Fatal("bidding-server died")
	}
	s.stop(t)
}

// TestConsentedDebugEndToEnd: the demo (embedded example module, examples
// bucket, TensorFlow sidecar) with --consented_debug_token. A request
// consented with the token gets debug_info.logs: per interest group, in
// order, the sidecar's debug line of each model it ran (naming the model
// path) and then the module's console line. A wrong, missing or
// unconsented token gets no debug_info, and console output never reaches
// the server's log, even at --log_level debug.
func TestConsentedDebugEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	// The JS workers and the in-process pool collect the lines through the
	// same jsworker.CollectLogs: both must answer alike.
	t.Run("workers", func(t *testing.T) { consentedDebugEndToEnd(t) })
	t.Run("in-process", func(t *testing.T) { consentedDebugEndToEnd(t, "--js_in_process") })
}

func consentedDebugEndToEnd(t *testing.T, extraArgs ...string) {
	root := testhelp.ModuleRoot(t)
	bin := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	const token = "let-me-see-7f3a"
	s := startBiddingServer(t, bin, append([]string{
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
		"--consented_debug_token", token,
		"--log_level", "debug",
	}, extraArgs...), nil)
	raw, err := os.ReadFile(filepath.Join(root, "examples/bidding/request.json"))
	if err != nil {
		t.Fatal(err)
	}
	groups := []string{"running-shoes", "coffee", "travel"}
	send := func(t *testing.T, debug any) (bidsResponse, map[string]json.RawMessage) {
		t.Helper()
		var req map[string]any
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		if debug != nil {
			req["consented_debug_config"] = debug
		}
		body, _ := json.Marshal(req)
		code, out := post(t, s.url+"/v1/generateBids", string(body))
		var r bidsResponse
		var top map[string]json.RawMessage
		if code != 200 || json.Unmarshal([]byte(out), &r) != nil || json.Unmarshal([]byte(out), &top) != nil || len(r.Bids) != len(groups) {
			t.Fatalf("%d %s", code, out)
		}
		for i, b := range r.Bids {
			if b.IG != groups[i] || b.Error != "" {
				t.Fatalf("bid %d: %+v", i, b)
			}
		}
		return r, top
	}

	for name, debug := range map[string]any{
		"none":          nil,
		"wrong_token":   map[string]any{"is_consented": true, "token": "guess"},
		"missing_token": map[string]any{"is_consented": true},
		"not_consented": map[string]any{"is_consented": false, "token": token},
	} {
		t.Run(name, func(t *testing.T) {
			if _, top := send(t, debug); top["debug_info"] != nil {
				t.Errorf("debug_info without consent: %s", top["debug_info"])
			}
		})
	}

	t.Run("consented", func(t *testing.T) {
		_, top := send(t, map[string]any{"is_consented": true, "token": token})
		var info struct{ Logs []string }
		if err := json.Unmarshal(top["debug_info"], &info); err != nil {
			t.Fatalf("debug_info %s: %v", top["debug_info"], err)
		}
		// Per group: the pctr entry, the pcvr entry (the sidecar's lines,
		// naming each entry's model), then the module's console.log.
		var want []*regexp.Regexp
		for _, g := range groups {
			want = append(want,
				regexp.MustCompile(`^\[inference\] entry 0 model "pctr/v2/": ok`),
				regexp.MustCompile(`^\[inference\] entry 1 model "pcvr/v1/": ok`),
				regexp.MustCompile(`^\[console\.info\] bid `+regexp.QuoteMeta(g)+` https://ads\.example/`))
		}
		if len(info.Logs) != len(want) {
			t.Fatalf("debug_info.logs has %d lines, want %d:\n%s", len(info.Logs), len(want), strings.Join(info.Logs, "\n"))
		}
		for i, re := range want {
			if !re.MatchString(info.Logs[i]) {
				t.Errorf("line %d %q, want %v; all:\n%s", i, info.Logs[i], re, strings.Join(info.Logs, "\n"))
			}
		}
	})

	// The module's console lines ("bid GROUP RENDER_URL BID") went to the
	// consented response only.
	for _, g := range groups {
		if line := grepLine(s.log(), "bid "+g+" https://"); line != "" {
			t.Errorf("console output in the server's log: %s", line)
		}
	}
	s.stop(t)
}

// TestLoopAfterInferenceIsCancelled: a script that loops after the
// request's earlier calls ran inference is stopped when its request ends,
// long before its own call deadline. The worker waits for the sidecar's
// answers with raw system calls, which leave the Go runtime's monitor
// (sysmon) asleep once the worker parks; the loop must still be preempted
// so that the host's cancel frame is read (jsworker's keepMonitorAwake).
// What shows a loop left running is its worker's CPU time, still growing
// after the client left.
func TestLoopAfterInferenceIsCancelled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	udf := filepath.Join(t.TempDir(), "loop.js")
	const module = `
function generateBid(ig) {
  if (ig.name === "loop") { for (;;) {} }
  // A batch the sidecar answers with an error entry (no such input): a
  // round trip all the same.
  var out = JSON.parse(runInference('{"request":[{"model_path":"pctr/v1/","tensors":[{"tensor_name":"nope","data_type":"FLOAT","tensor_shape":[1,1],"tensor_content":["1"]}]}]}'));
  return {bid: 1, answered: out.response.length};
}`
	if err := os.WriteFile(udf, []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startBiddingServer(t, server, []string{
		"--udf_code_path", udf,
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
		"--js_call_timeout", "60s", "--js_request_budget", "-1",
		"--request_timeout", "60s",
	}, []string{"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin})
	workers := func() []int {
		var out []int
		sidecars := sidecarPIDs(s.cmd.Process.Pid)
		for _, k := range childPIDs(s.cmd.Process.Pid) {
			if !slices.Contains(sidecars, k) {
				out = append(out, k)
			}
		}
		return out
	}
	cpu := func() time.Duration {
		var ticks int64
		for _, pid := range workers() {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + st
		}
		return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
	}
	// The client gives up after 500ms and closes its connection: the
	// request's ctx ends then, with no deadline the worker knew of.
	client := &http.Client{Timeout: 500 * time.Millisecond}
	body := `{"interest_groups":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"loop"}]}`
	if resp, err := client.Post(s.url+"/v1/generateBids", "application/json", strings.NewReader(body)); err == nil {
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("generateBids answered before the loop's end: %d %.500s", resp.StatusCode, out)
	}
	// The loop is stopped a few monitor ticks after the client left;
	// left running, it would take a CPU until its deadline (60s).
	time.Sleep(500 * time.Millisecond)
	before := cpu()
	time.Sleep(2 * time.Second)
	if used := cpu() - before; used > time.Second {
		t.Fatalf("the JS workers used %v of CPU in the 2s after the request ended: the cancelled loop still runs", used)
	}
}
