package sidecar_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// floatJSONRequest is a one-entry JSON batch of about size bytes: a FLOAT
// [rows,3] tensor for path, values as JSON numbers of 8 characters.
func floatJSONRequest(path string, size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 256)
	rows := size / 27 // three values of 8 characters and their commas
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,3],"tensor_content":[`, path, rows)
	for i := range rows * 3 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(i%1000)/1000+0.000125, 'f', 6, 64))
	}
	b.WriteString(`]}]}]}`)
	return b.Bytes()
}

// TestJSONPredictMemory measures what a large JSON Predict costs a real
// sidecar process (the in-test affine runtime in a child process, over
// gRPC): the growth of its peak RSS per byte of request, and its RSS once
// the answer is out. It reports the figures (go test -v -run
// JSONPredictMemory ./sidecar/) and fails only far beyond the design's
// ~2x (the model's own output comes on top when it is registered) or when
// the memory is still held 30 s after the request.
func TestJSONPredictMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("sends 100 MB requests to a child sidecar and measures its memory (not under -short or -race)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	socket := testhelp.SocketPath(t, "s.sock")
	cmd := exec.Command(exe, "--socket", socket)
	cmd.Env = append(os.Environ(), "INFERBID_TEST_CHILD_SIDECAR=1")
	var stderr testhelp.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid

	c, err := sidecar.NewClient(socket, sidecar.ClientOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("child sidecar: %v; stderr: %s", err, stderr.String())
	}
	if err := c.RegisterModel(ctx, "affine/", runtimes.Files{"affine": []byte("2 1")}, ""); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{10 << 20, 100 << 20} {
		for _, model := range []string{"unregistered/", "affine/"} {
			req := floatJSONRequest(model, size)
			base := testhelp.ProcStatus(t, pid, "VmRSS")
			// Reset the peak to the current RSS (clear_refs 5).
			if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
				t.Skipf("cannot reset the child's peak RSS: %v", err)
			}
			start := time.Now()
			out, err := c.PredictJSON(ctx, req)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			res, err := batch.ParseResponse(out)
			if err != nil || len(res) != 1 || (model == "affine/") != (res[0].Err == nil) {
				t.Fatalf("%s: answer %v %v", model, err, res)
			}
			peak := testhelp.ProcStatus(t, pid, "VmHWM")
			perByte := float64(peak-base) / float64(len(req))
			// Memory goes back to the OS shortly after the answer.
			var after int64
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				after = testhelp.ProcStatus(t, pid, "VmRSS")
				if after < base+int64(len(req))/4 || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("%-13s request %4d MB, answer %4d MB: RSS %4d MB -> peak %4d MB (%.2f x request) -> %4d MB %v after the answer (took %v)",
				model, len(req)>>20, len(out)>>20, base>>20, peak>>20, perByte, after>>20, time.Since(start)-took, took.Round(time.Millisecond))
			limit := 6.0 // the parse path alone; the affine model adds its output (~2x in JSON)
			if model == "affine/" {
				limit = 10
			}
			if perByte > limit {
				t.Errorf("%s: a %d MB JSON Predict raised the sidecar's peak RSS by %.1fx its size", model, len(req)>>20, perByte)
			}
			if after >= base+int64(len(req))/4 {
				t.Errorf("%s: the sidecar still holds %d MB over its %d MB baseline 30 s after a %d MB request", model, (after-base)>>20, base>>20, len(req)>>20)
			}
		}
	}
}
