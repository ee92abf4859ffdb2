package jsbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/sidecar"
)

// enteredInference is the supervisor's real client, announcing each Predict
// as it starts, so the test knows calls are in flight before it kills the
// sidecar.
type enteredInference struct {
	*sidecar.Client
	entered chan struct{}
}

func (e enteredInference) Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	return e.Client.Predict(ctx, entries)
}

// TestSidecarKilledMidTraffic: the sidecar process (this test binary,
// re-executed, under the real supervisor) is SIGKILLed while calls are in
// flight. Those calls get a GRPC batch error, not an exception; the
// supervisor restarts the sidecar and replays the models, and later calls
// work again.
func TestSidecarKilledMidTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills sidecar processes")
	}
	sup := startChildSidecar(t)
	register(t, sup, "slow/", "sleep 20000")
	register(t, sup, "affine/", "affine 2 1")
	const inFlight = 3
	inf := enteredInference{Client: sup.Client(), entered: make(chan struct{}, inFlight)}
	p := newInferencePool(t, inf, Options{Size: inFlight + 1, CallTimeout: time.Minute, ModelPathsTTL: -1})

	slowCall, _ := json.Marshal("runInference(" + batchJSON("slow/", "[1]", "[1]") + ")")
	results := make([]string, inFlight)
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Go(func() {
			out, err := p.CallJSON(context.Background(), "call", slowCall)
			if err != nil {
				results[i] = "call error: " + err.Error()
				return
			}
			var s string
			_ = json.Unmarshal(out, &s)
			results[i] = s
		})
	}
	for range inFlight {
		<-inf.entered
	}
	time.Sleep(200 * time.Millisecond) // let the RPCs reach the sidecar
	pid := sup.Pid()
	if pid == 0 {
		t.Fatal("no sidecar pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, s := range results {
		var r response
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("in-flight call %d: %q", i, s)
		}
		if len(r.Response) != 1 || r.Response[0].Error == nil || r.Response[0].Error.Type != "GRPC" || r.Response[0].ModelPath != nil {
			t.Errorf("in-flight call %d: want a GRPC batch error, got %s", i, s)
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	for sup.Restarts() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the sidecar was not restarted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sup.Pid() == pid {
		t.Fatal("same pid after a restart")
	}
	// Models were replayed: inference works again, from JS, on the same pool.
	for x := range 5 {
		r := infer(t, p, batchJSON("affine/", "[1]", fmt.Sprintf("[%d]", x)))
		if len(r.Response) != 1 || r.Response[0].Error != nil || r.Response[0].Tensors[0].Content[0] != float64(2*x+1) {
			t.Fatalf("after the restart: %+v", r)
		}
	}
	if got := evalJS(t, p, "getModelPaths()"); got != `"[\"affine/\",\"slow/\"]"` {
		t.Errorf("getModelPaths() after the restart = %s", got)
	}
}
