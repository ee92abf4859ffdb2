package sidecar

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// take returns what was written since the last take.
func (s *syncBuffer) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}

// collect is a batch.DebugSink keeping its lines.
type collect struct {
	mu    sync.Mutex
	lines []string
}

func (c *collect) sink(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
}

func (c *collect) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.lines
	c.lines = nil
	return out
}

// consentServer serves the TensorFlow runtime on a real socket with
// affine/ (y = 2x + 1) registered; the server logs at DEBUG into the
// returned buffer, where the lines of consented requests show. It returns
// a client per transport.
func consentServer(t *testing.T) (map[Transport]*Client, *syncBuffer) {
	t.Helper()
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	logged := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, fast := serveOnSocket(t, ServerOptions{Runtime: rt, Logger: log})
	slow, err := NewClient(fast.SocketPath(), ClientOptions{Logger: quietLog, Transport: TransportGRPC})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	files, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fast.RegisterModel(ctx, "affine/", files, ""); err != nil {
		t.Fatal(err)
	}
	logged.take()
	return map[Transport]*Client{TransportFastLane: fast, TransportGRPC: slow}, logged
}

// A consented Predict hands the sink one line per entry sent, in entry
// order, each naming its model path and numbered as the caller's entries
// are (entry 1 never left the host); without consent the sidecar is not
// asked, on either transport.
func TestPredictDebugLogsOnlyWhenConsented(t *testing.T) {
	clients, logged := consentServer(t)
	x := tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})
	entries := []batch.Entry{
		{ModelPath: "affine/", Tensors: []tensor.Tensor{x}},
		{ModelPath: "host-rejected/", Err: inferr.Errorf(inferr.InputParsing, "kept out by the host")},
		{ModelPath: "missing/", Tensors: []tensor.Tensor{x}},
		{ModelPath: "affine/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 2}, []float32{1, 2})}},
	}
	want := []string{
		`entry 0 model "affine/": ok in `,
		`entry 2 model "missing/": MODEL_NOT_FOUND: `,
		`entry 3 model "affine/": INPUT_PARSING: `,
	}
	for _, tr := range []Transport{TransportFastLane, TransportGRPC} {
		t.Run(tr.String(), func(t *testing.T) {
			c := clients[tr]
			check := func(res []batch.Result, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Err != nil || res[1].Err == nil || inferr.TypeOf(res[2].Err) != inferr.ModelNotFound || inferr.TypeOf(res[3].Err) != inferr.InputParsing {
					t.Fatalf("results %+v", res)
				}
			}

			var got collect
			check(c.Predict(context.Background(), entries))
			check(c.Predict(batch.WithDebugLog(batch.WithDebugLog(context.Background(), got.sink), nil), entries))
			if lines := got.take(); len(lines) != 0 {
				t.Errorf("not consented, the sink got %q", lines)
			}
			if l := logged.take(); strings.Contains(l, "consented=true") {
				t.Errorf("not consented, the sidecar collected debug lines:\n%s", l)
			}

			ctx, cancel := context.WithTimeout(batch.WithDebugLog(context.Background(), got.sink), 10*time.Second)
			defer cancel()
			check(c.Predict(ctx, entries))
			lines := got.take()
			if len(lines) != len(want) {
				t.Fatalf("consented: the sink got %q, want %d lines", lines, len(want))
			}
			for i, l := range lines {
				if !strings.HasPrefix(l, want[i]) {
					t.Errorf("line %d is %q, want it to start %q", i, l, want[i])
				}
			}
			if l := logged.take(); strings.Count(l, "consented=true") != len(want) {
				t.Errorf("consented: the sidecar logged\n%s\nwant %d consented lines", l, len(want))
			}
		})
	}
}

// PredictJSON (gRPC) hands the sink the lines of the JSON batch, numbered
// as its entries, only when consented; a batch rejected whole says so.
func TestPredictJSONDebugLogs(t *testing.T) {
	clients, _ := consentServer(t)
	c := clients[TransportGRPC]
	js := []byte(`{"request":[
	 {"model_path":"affine/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":[1,2,3]}]},
	 {"model_path":"affine/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":[1,2]}]}]}`)
	var got collect
	if _, err := c.PredictJSON(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	if lines := got.take(); len(lines) != 0 {
		t.Fatalf("not consented: %q", lines)
	}
	ctx := batch.WithDebugLog(context.Background(), got.sink)
	if _, err := c.PredictJSON(ctx, js); err != nil {
		t.Fatal(err)
	}
	lines := got.take()
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `entry 0 model "affine/": ok in `) || !strings.HasPrefix(lines[1], `entry 1 model "affine/": not run: INPUT_PARSING: `) {
		t.Fatalf("consented JSON batch: lines %q", lines)
	}
	if _, err := c.PredictJSON(ctx, []byte(`not json`)); err != nil {
		t.Fatal(err)
	}
	if lines := got.take(); len(lines) != 1 || !strings.HasPrefix(lines[0], "batch rejected, no model run: INPUT_PARSING: ") {
		t.Fatalf("rejected JSON batch: lines %q", lines)
	}
}

func TestRenumberDebugLine(t *testing.T) {
	sent := []int{0, 2, 5}
	for in, want := range map[string]string{
		debugEntryLine(1, "m/", "ok in 1ms"): `entry 2 model "m/": ok in 1ms`,
		debugEntryLine(2, "m/", "ok in 1ms"): `entry 5 model "m/": ok in 1ms`,
		debugEntryLine(3, "m/", "ok"):        `entry 3 model "m/": ok`, // not an entry sent: as it is
		"batch rejected, no model run: x":    "batch rejected, no model run: x",
		"entry x model":                      "entry x model",
		"entry 1":                            "entry 1",
	} {
		if got := renumberDebugLine(in, sent); got != want {
			t.Errorf("renumberDebugLine(%q) = %q, want %q", in, got, want)
		}
	}
	if l := debugEntryLine(0, strings.Repeat("p", 1000), "ok"); len(l) > 400 || !slices.Contains(strings.Fields(l), "model") {
		t.Errorf("a long model path is not clipped: %d bytes", len(l))
	}
}
