package modelstore

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	_ "github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// exampleModel reads a SavedModel of the examples bucket and its warm-up
// request (for the same path) from the examples config.
func exampleModel(t *testing.T, path string) (runtimes.Files, string) {
	t.Helper()
	root := filepath.Join("..", "examples", "bucket")
	data, err := os.ReadFile(filepath.Join(root, "model_config.json"))
	if err != nil {
		t.Skipf("examples bucket absent: %v", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cfg.Models {
		if m.Path == path {
			files, err := modelfiles.ReadLocal(filepath.Join(root, filepath.FromSlash(path)))
			if err != nil {
				t.Fatal(err)
			}
			return files, m.WarmUpJSON
		}
	}
	t.Skipf("examples bucket has no %s", path)
	return nil, ""
}

// TestSyncUnderTrafficWithRealSidecar drives a real sidecar (in-process
// gRPC server on a Unix socket, pure-Go TensorFlow runtime) from a watcher
// while requests run: a model is updated in place and another delisted,
// and no request sees MODEL_NOT_FOUND for a model the config lists or whose
// grace has not ended. The JS host is not involved (the lead's end-to-end
// test covers generateBid).
func TestSyncUnderTrafficWithRealSidecar(t *testing.T) {
	v1, warm1 := exampleModel(t, "pctr/v1/")
	v2, _ := exampleModel(t, "pctr/v2/")
	other, warmOther := exampleModel(t, "pcvr/v1/")
	rt, err := runtimes.Open("tensorflow", runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	e := newEnv(t, backends()[0], func(o *WatcherOptions) { o.Registrar = client })
	// The served path is "pctr/" (the in-place update target); its warm-up
	// request names that path.
	warm := strings.ReplaceAll(warm1, "pctr/v1/", "pctr/")
	sum1 := e.putModel("pctr/", v1)
	sumOther := e.putModel("pcvr/v1/", other)
	e.putConfig(cfgEntry{path: "pctr/", checksum: sum1, warmUp: warm, graceMs: 5000},
		cfgEntry{path: "pcvr/v1/", checksum: sumOther, warmUp: warmOther, graceMs: 5000})
	e.mustSync()

	// Traffic: the warm-up requests, sent continuously.
	var stop atomic.Bool
	var pcvrDeleted atomic.Bool
	var requests, failures atomic.Int64
	var mu sync.Mutex
	var firstFailure string
	outputs := map[string]bool{} // distinct pctr/ outputs seen
	var wg sync.WaitGroup
	send := func(path, body string) {
		defer wg.Done()
		for !stop.Load() {
			resp, err := client.PredictJSON(ctx, []byte(body))
			// The flag is set before the sync that may delete pcvr/v1/, so a
			// MODEL_NOT_FOUND that deletion caused always sees it set.
			deletedBefore := pcvrDeleted.Load()
			requests.Add(1)
			desc := ""
			if err != nil {
				desc = err.Error()
			} else if results, perr := batch.ParseResponse(resp); perr != nil {
				desc = perr.Error()
			} else if len(results) != 1 {
				desc = "want one result: " + string(resp)
			} else if results[0].Err != nil {
				if inferr.TypeOf(results[0].Err) == inferr.ModelNotFound && path == "pcvr/v1/" && deletedBefore {
					continue // delisted and its grace ended: allowed
				}
				desc = results[0].Err.Error()
			} else if path == "pctr/" {
				out, _ := json.Marshal(results[0].Tensors)
				mu.Lock()
				outputs[string(out)] = true
				mu.Unlock()
			}
			if desc != "" {
				failures.Add(1)
				mu.Lock()
				if firstFailure == "" {
					firstFailure = path + ": " + desc
				}
				mu.Unlock()
			}
		}
	}
	wg.Add(4)
	go send("pctr/", warm)
	go send("pctr/", warm)
	go send("pcvr/v1/", warmOther)
	go send("pcvr/v1/", warmOther)

	pause := func() { // let traffic run between steps (not a timed assertion)
		time.Sleep(100 * time.Millisecond)
	}
	pause()
	// In-place update of pctr/ and delisting of pcvr/v1/, both with a 5 s grace.
	sum2 := e.putModel("pctr/", v2)
	e.putConfig(cfgEntry{path: "pctr/", checksum: sum2, warmUp: warm, graceMs: 5000})
	e.mustSync()
	pause()
	e.clock.Advance(4 * time.Second)
	e.mustSync()
	pause()
	e.clock.Advance(time.Second)
	// pcvr/v1/ may be gone from here on.
	pcvrDeleted.Store(true)
	e.mustSync() // swaps pctr/ to v2 under traffic, deletes pcvr/v1/
	pause()
	stop.Store(true)
	wg.Wait()

	if failures.Load() > 0 {
		t.Errorf("%d of %d requests failed; first: %s", failures.Load(), requests.Load(), firstFailure)
	}
	paths, err := client.ModelPaths(ctx)
	if err != nil || strings.Join(paths, ",") != "pctr/" {
		t.Errorf("ModelPaths = %v, %v; want [pctr/]", paths, err)
	}
	if e.w.Models()["pctr/"].Checksum != sum2 {
		t.Error("pctr/ not updated to v2")
	}
	if len(outputs) < 2 {
		t.Errorf("pctr/ gave %d distinct outputs, want both v1's and v2's", len(outputs))
	}
	t.Logf("%d requests during add, in-place update and removal", requests.Load())
}

// An entry's stateful-model settings reach a real sidecar with the model:
// the running sum is served with sequences (the runtime config lists
// nothing) and the entry's max_sequence_number 1 holds.
func TestEntrySequenceSettingsReachTheSidecar(t *testing.T) {
	rt, err := runtimes.Open("tensorflow", runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, SequenceCleanerInterval: -1}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, backends()[0], func(o *WatcherOptions) { o.Registrar = client })
	sum := e.putModel("sum/", files)
	e.putConfig(cfgEntry{path: "sum/", checksum: sum, extra: `"stateful":true,"max_sequence_number":1,"low_latency_transformation":false`})
	e.mustSync()
	entry := func(id int64) []batch.Entry {
		return []batch.Entry{{ModelPath: "sum/", Tensors: []tensor.Tensor{
			tensor.New("x", []int64{1}, []float32{2}),
			tensor.New(sidecar.SequenceIDName, []int64{1}, []int64{id}),
			tensor.New(sidecar.SequenceControlName, []int64{1}, []int32{1})}}}
	}
	res, err := client.Predict(ctx, entry(3))
	if err != nil || res[0].Err != nil {
		t.Fatalf("start of sequence 3: %v %v", err, res)
	}
	res, err = client.Predict(ctx, entry(4))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := sequence.CodeOf(res[0].Err); !ok || c != sequence.Unavailable {
		t.Fatalf("a second sequence over the entry's limit of 1: %v, want UNAVAILABLE", res[0].Err)
	}
}

// A Registrar that cannot carry the settings fails the entry, naming why.
func TestEntrySequenceSettingsNeedASequenceRegistrar(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	sum := e.putModel("m/", runtimes.Files{"m": []byte("x")})
	e.putConfig(cfgEntry{path: "m/", checksum: sum, extra: `"stateful":true`})
	if err := e.sync(); err == nil || !strings.Contains(err.Error(), "cannot carry them") {
		t.Fatalf("sync: %v, want the entry failed for its settings", err)
	}
}

// The sidecar's Supervisor (what bidding-server passes) and Client carry
// an entry's settings.
var (
	_ SequenceRegistrar = (*sidecar.Supervisor)(nil)
	_ SequenceRegistrar = (*sidecar.Client)(nil)
	_ DiskRegistrar     = (*sidecar.Supervisor)(nil)
)
