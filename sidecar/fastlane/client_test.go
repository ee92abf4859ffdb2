package fastlane

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

func TestClientErrorsKeepTheirTypeAndMessage(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	_, err := c.Predict(context.Background(), batchOf("a/", "fail:too many"))
	if ie, ok := errors.AsType[*inferr.Error](err); !ok || ie.Type != inferr.InputParsing || ie.Error() != "refused: too many" {
		t.Errorf("whole-call error = %#v, want INPUT_PARSING %q", err, "refused: too many")
	}
	// The connection that carried an error answer is reused.
	if _, err := c.Predict(context.Background(), batchOf("a/")); err != nil {
		t.Fatal(err)
	}
	if n := len(c.all); n != 1 {
		t.Errorf("%d connections after two sequential calls", n)
	}
}

func TestClientRefusedDialFailsAtOnce(t *testing.T) {
	socket := testhelp.SocketPath(t, "none.sock")
	c := NewClient(socket, ClientOptions{})
	defer c.Close()
	start := time.Now()
	_, err := c.Predict(context.Background(), batchOf("a/"))
	if inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), socket) || !strings.Contains(err.Error(), "dial") {
		t.Errorf("no sidecar: %v, want a GRPC dial error naming the socket", err)
	}
	// A socket file nobody listens on: ECONNREFUSED.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := c.Predict(context.Background(), batchOf("a/")); inferr.TypeOf(err) != inferr.GRPC {
		t.Errorf("stale socket: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused dials took %v", d)
	}
}

// ErrNotSent marks exactly the failures where the sidecar cannot have
// had the request: a refused dial is one; a connection that took the
// request and died before answering is not.
func TestClientErrNotSent(t *testing.T) {
	socket := testhelp.SocketPath(t, "ns.sock")
	c := NewClient(socket, ClientOptions{})
	defer c.Close()
	if _, err := c.Predict(context.Background(), batchOf("a/")); !errors.Is(err, ErrNotSent) || inferr.TypeOf(err) != inferr.GRPC {
		t.Errorf("no sidecar: %v, want a GRPC error wrapping ErrNotSent", err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			conn.Read(make([]byte, 64<<10)) // takes the request, answers nothing
			conn.Close()
		}
	}()
	_, err = c.Predict(context.Background(), batchOf("a/"))
	if err == nil || errors.Is(err, ErrNotSent) {
		t.Errorf("a sidecar that took the request and died: %v, want an error without ErrNotSent", err)
	}
}

// The sidecar restarts: the pooled connections are dead; the next call
// retries once on a new connection and succeeds.
func TestClientRetriesOnceAfterARestart(t *testing.T) {
	socket := testhelp.SocketPath(t, "r.sock")
	start := func() *Server {
		srv, _ := NewServer(ServerOptions{Handler: newEchoHandler().handle, Logger: quiet})
		lis, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		return srv
	}
	srv := start()
	c := NewClient(socket, ClientOptions{})
	defer c.Close()
	var wg sync.WaitGroup
	for range 4 { // several pooled connections
		wg.Go(func() {
			if _, err := c.Predict(context.Background(), batchOf("sleep:20ms")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(c.idle) < 2 {
		t.Fatalf("%d idle connections, want several", len(c.idle))
	}
	srv.Stop()
	// While it is down: a GRPC error, at once.
	if _, err := c.Predict(context.Background(), batchOf("a/")); inferr.TypeOf(err) != inferr.GRPC {
		t.Errorf("sidecar down: %v", err)
	}
	srv = start()
	defer srv.Stop()
	for i := range 3 {
		if _, err := c.Predict(context.Background(), batchOf("a/")); err != nil {
			t.Errorf("call %d after the restart: %v", i, err)
		}
	}
}

// With the pool full, a caller waits for a connection or its deadline.
func TestClientPoolBound(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{MaxConns: 1})
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := c.Predict(context.Background(), batchOf("sleep:500ms")); done <- err }()
	waitFor(t, "the first call", func() bool { return ts.h.inFlight.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Predict(ctx, batchOf("a/"))
	if inferr.TypeOf(err) != inferr.GRPC || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past the deadline: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the deadline error came after %v", d)
	}
	if _, err := c.Predict(context.Background(), batchOf("b/")); err != nil {
		t.Errorf("a caller that waits: %v", err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// The ctx deadline travels to the server and bounds the wait here; a
// cancellation abandons the call and the server's ctx ends too.
func TestClientDeadlineAndCancel(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Predict(ctx, batchOf("sleep:10s"))
	if d := time.Since(start); d < 90*time.Millisecond || d > 2*time.Second {
		t.Errorf("a 100ms deadline returned after %v", d)
	}
	if inferr.TypeOf(err) != inferr.GRPC || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	select {
	case err := <-ts.h.ctxErrs:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Errorf("server ctx: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the server's call was not stopped")
	}
	if d := <-ts.h.deadlines; d.IsZero() {
		t.Error("the deadline did not reach the server")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "the call", func() bool { return ts.h.inFlight.Load() == 1 })
		cancel2()
	}()
	_, err = c.Predict(ctx2, batchOf("sleep:10s"))
	if inferr.TypeOf(err) != inferr.GRPC || !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
	select {
	case err := <-ts.h.ctxErrs:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("server ctx after a cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the server's call was not cancelled")
	}
	// Expired or cancelled before the call: nothing is sent.
	calls := ts.h.calls.Load()
	_, err = c.Predict(ctx2, batchOf("a/"))
	if !errors.Is(err, context.Canceled) || ts.h.calls.Load() != calls {
		t.Errorf("a cancelled ctx: %v (%d calls made)", err, ts.h.calls.Load()-calls)
	}
	// And the pool still works.
	if _, err := c.Predict(context.Background(), batchOf("a/")); err != nil {
		t.Error(err)
	}
}

func TestClientLargeFramesAndCap(t *testing.T) {
	big := strings.Repeat("m", 3<<20)
	ts := startServer(t, ServerOptions{MaxFrameBytes: 4 << 20})
	c := NewClient(ts.socket, ClientOptions{MaxFrameBytes: 4 << 20})
	defer c.Close()
	resp, err := c.Predict(context.Background(), batchOf(big, "b/"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult().GetResponses(); len(got) != 2 || got[0].GetModelPath() != big {
		t.Errorf("a 3 MiB round trip came back wrong")
	}
	_, err = c.Predict(context.Background(), batchOf(big, big))
	if inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), "cap") {
		t.Errorf("a request over the cap: %v", err)
	}
	// The server refuses to send an answer over its cap, with a GRPC error.
	small := NewClient(ts.socket, ClientOptions{MaxFrameBytes: 8 << 20})
	defer small.Close()
	ts2 := startServer(t, ServerOptions{MaxFrameBytes: 1 << 20, Handler: func(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		return &inferencepb.PredictResponse{DebugLogs: []string{strings.Repeat("x", 2<<20)}}, nil
	}})
	c2 := NewClient(ts2.socket, ClientOptions{})
	defer c2.Close()
	_, err = c2.Predict(context.Background(), batchOf("a/"))
	if inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), "cap") {
		t.Errorf("an answer over the server's cap: %v", err)
	}
}

func TestClientClose(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{})
	done := make(chan error, 1)
	go func() { _, err := c.Predict(context.Background(), batchOf("sleep:10s")); done <- err }()
	waitFor(t, "the call", func() bool { return ts.h.inFlight.Load() == 1 })
	c.Close()
	select {
	case err := <-done:
		if inferr.TypeOf(err) != inferr.GRPC {
			t.Errorf("a call in flight at Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the call in flight")
	}
	if _, err := c.Predict(context.Background(), batchOf("a/")); inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close: %v", err)
	}
}

// Wake with no connection yet does nothing; after a call, it writes a wake
// frame on the idle connection, which the next call reuses.
func TestClientWake(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	c.Wake()
	if n := len(c.all); n != 0 {
		t.Fatalf("Wake dialled: %d connections", n)
	}
	for i := range 3 {
		if _, err := c.Predict(context.Background(), batchOf("a/")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		c.Wake()
	}
	if n := len(c.all); n != 1 {
		t.Errorf("%d connections after sequential calls and wakes, want 1", n)
	}
	c.Close()
	c.Wake() // a closed client: nothing, no panic

	// A connection whose first call failed before writing (a request that
	// does not encode: invalid UTF-8 in a string) has not sent the magic;
	// a wake on it sends it first, and the next call works on it.
	c = NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	if _, err := c.Predict(context.Background(), batchOf("\xff/")); inferr.TypeOf(err) != inferr.InputParsing {
		t.Fatalf("a request that does not encode: %v, want INPUT_PARSING", err)
	}
	if len(c.idle) != 1 || c.idle[0].hello {
		t.Fatalf("idle connections after the failed call: %d (hello %v), want 1 that sent nothing", len(c.idle), len(c.idle) == 1 && c.idle[0].hello)
	}
	woken := c.idle[0]
	c.Wake()
	if _, err := c.Predict(context.Background(), batchOf("a/")); err != nil {
		t.Fatalf("the call after a wake on a fresh connection: %v", err)
	}
	if len(c.idle) != 1 || c.idle[0] != woken {
		t.Errorf("the call did not reuse the woken connection (the server closed it?)")
	}
}

// SetPolling(false): calls park for their answers at once (no polling
// slot taken while the sidecar works) and Wake sends nothing, so the
// server's reader is not woken to poll; SetPolling(true) brings both back.
func TestClientSetPolling(t *testing.T) {
	ts := startServer(t, ServerOptions{SpinWait: time.Microsecond, WakeSpinWait: time.Minute})
	c := NewClient(ts.socket, ClientOptions{SpinWait: time.Minute})
	defer c.Close()
	if _, err := c.Predict(context.Background(), batchOf("a/")); err != nil {
		t.Fatal(err)
	}
	polledDuring := func(call string) bool {
		done := make(chan error, 1)
		go func() {
			_, err := c.Predict(context.Background(), batchOf(call))
			done <- err
		}()
		polled := false
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				return polled
			default:
				polled = polled || processSlots.n.Load() == 1
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	c.SetPolling(false)
	if polledDuring("sleep:100ms") {
		t.Error("a call polled for its answer with polling off")
	}
	time.Sleep(20 * time.Millisecond) // the server's reader parks
	c.Wake()
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
		if n := ts.srv.spinSlots.n.Load(); n != 0 {
			t.Fatalf("a wake with polling off made %d server readers poll", n)
		}
		time.Sleep(100 * time.Microsecond)
	}
	c.SetPolling(true)
	if !polledDuring("sleep:100ms") {
		t.Error("a call never polled for its answer with polling back on")
	}
	c.Wake()
	waitFor(t, "the server's reader to poll after a wake with polling on", func() bool { return ts.srv.spinSlots.n.Load() == 1 })
}

// A whole-call error whose message is not UTF-8 (a native runtime quoting
// model bytes) still reaches the client with its type.
func TestClientErrorsNotUTF8KeepTheirType(t *testing.T) {
	ts := startServer(t, ServerOptions{Handler: func(context.Context, *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		return nil, inferr.Errorf(inferr.ModelExecution, "No Op registered for M\xffl")
	}})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	_, err := c.Predict(context.Background(), batchOf("a/"))
	if ie, ok := errors.AsType[*inferr.Error](err); !ok || ie.Type != inferr.ModelExecution || ie.Error() != "No Op registered for M\uFFFDl" {
		t.Errorf("whole-call error = %#v, want MODEL_EXECUTION with valid UTF-8", err)
	}
}
