package fastlane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// echoHandler answers a typed batch with one response per request, named
// after its model path. Paths starting with "sleep:" sleep that long (or
// until the ctx ends); "fail:" fails the whole call with INPUT_PARSING.
type echoHandler struct {
	calls    atomic.Int64
	inFlight atomic.Int64
	ctxErrs  chan error // a sleeping call's ctx error, when it ended early
	// deadlines receives each call's ctx deadline (zero when none).
	deadlines chan time.Time
}

func newEchoHandler() *echoHandler {
	return &echoHandler{ctxErrs: make(chan error, 64), deadlines: make(chan time.Time, 1024)}
}

func (h *echoHandler) handle(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	h.calls.Add(1)
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	d, _ := ctx.Deadline()
	select {
	case h.deadlines <- d:
	default:
	}
	out := &inferencepb.BatchResult{}
	for _, r := range req.GetBatch().GetRequests() {
		p := r.GetModelPath()
		if rest, ok := strings.CutPrefix(p, "fail:"); ok {
			return nil, inferr.Errorf(inferr.InputParsing, "refused: %s", rest)
		}
		if rest, ok := strings.CutPrefix(p, "sleep:"); ok {
			dur, _ := time.ParseDuration(rest)
			select {
			case <-time.After(dur):
			case <-ctx.Done():
				h.ctxErrs <- ctx.Err()
				return nil, inferr.Wrap(inferr.GRPC, ctx.Err(), "sleep cut short")
			}
		}
		out.Responses = append(out.Responses, &inferencepb.ModelResponse{ModelPath: p})
	}
	return &inferencepb.PredictResponse{Output: &inferencepb.PredictResponse_Result{Result: out}}, nil
}

func batchOf(paths ...string) *inferencepb.PredictRequest {
	b := &inferencepb.Batch{}
	for _, p := range paths {
		b.Requests = append(b.Requests, &inferencepb.ModelRequest{ModelPath: p})
	}
	return &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: b}}
}

type testServer struct {
	srv    *Server
	h      *echoHandler
	socket string
	served chan error
}

// startServer serves h on a fresh socket; the test's end stops it.
func startServer(t *testing.T, opts ServerOptions) *testServer {
	t.Helper()
	ts := &testServer{h: newEchoHandler(), socket: testhelp.SocketPath(t, "fl.sock"), served: make(chan error, 1)}
	if opts.Handler == nil {
		opts.Handler = ts.h.handle
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = srv
	lis, err := net.Listen("unix", ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	go func() { ts.served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-ts.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// rawConn is a hand-driven fast-lane connection.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, socket string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write([]byte(Magic)); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(f Frame) {
	r.t.Helper()
	if _, err := r.nc.Write(AppendFrame(nil, f)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) request(id uint64, timeout time.Duration, req *inferencepb.PredictRequest) {
	r.t.Helper()
	b, _ := proto.Marshal(req)
	r.send(Frame{Kind: KindRequest, ID: id, TimeoutMicros: uint64(timeout / time.Microsecond), Payload: b})
}

func (r *rawConn) recv() (Frame, error) {
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return ReadFrame(r.br, nil, DefaultMaxFrameBytes)
}

// closedByPeer waits for the server to close the connection.
func (r *rawConn) closedByPeer(within time.Duration) bool {
	r.nc.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, r.br)
	return !errors.Is(err, os.ErrDeadlineExceeded) // EOF, or ECONNRESET when it left bytes unread
}

func answerPaths(t *testing.T, f Frame) []string {
	t.Helper()
	if f.Kind != KindResponse {
		t.Fatalf("got a %s frame, want a response", f.Kind)
	}
	var resp inferencepb.PredictResponse
	if err := proto.Unmarshal(f.Payload, &resp); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range resp.GetResult().GetResponses() {
		paths = append(paths, r.GetModelPath())
	}
	return paths
}

func TestRawRequestsAnswered(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := dialRaw(t, ts.socket)
	c.request(1, 0, batchOf("a/", "b/"))
	f, err := c.recv()
	if err != nil || f.ID != 1 {
		t.Fatalf("answer %+v, %v", f, err)
	}
	if got := answerPaths(t, f); strings.Join(got, ",") != "a/,b/" {
		t.Errorf("answered %v", got)
	}
	// Pipelined: two requests in one write are both answered.
	b1, _ := proto.Marshal(batchOf("sleep:50ms"))
	b2, _ := proto.Marshal(batchOf("c/"))
	both := AppendFrame(AppendFrame(nil, Frame{Kind: KindRequest, ID: 2, Payload: b1}), Frame{Kind: KindRequest, ID: 3, Payload: b2})
	c.nc.Write(both)
	got := map[uint64]bool{}
	for range 2 {
		f, err := c.recv()
		if err != nil {
			t.Fatal(err)
		}
		got[f.ID] = true
	}
	if !got[2] || !got[3] {
		t.Errorf("pipelined answers %v", got)
	}
	// A request that is not a PredictRequest is answered INPUT_PARSING.
	c.send(Frame{Kind: KindRequest, ID: 4, Payload: []byte{0xff, 0xff}})
	f, err = c.recv()
	if err != nil || f.Kind != KindError || f.ID != 4 {
		t.Fatalf("answer to junk: %+v %v", f, err)
	}
	var e inferencepb.Error
	proto.Unmarshal(f.Payload, &e)
	if e.GetType() != inferencepb.ErrorType_INPUT_PARSING {
		t.Errorf("junk request: %v", &e)
	}
}

// A wake frame is answered by nothing; the request after it is answered,
// on the same connection, and so is one after a wake that no request
// followed.
func TestWakeFrames(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := dialRaw(t, ts.socket)
	c.send(Frame{Kind: KindWake})
	c.request(1, 0, batchOf("a/"))
	f, err := c.recv()
	if err != nil || f.ID != 1 || f.Kind != KindResponse {
		t.Fatalf("the answer after a wake: %+v, %v", f, err)
	}
	if got := answerPaths(t, f); strings.Join(got, ",") != "a/" {
		t.Errorf("answered %v", got)
	}
	c.send(Frame{Kind: KindWake})
	time.Sleep(2 * DefaultWakeSpinWait) // the request comes after the window
	c.request(2, 0, batchOf("b/"))
	if f, err := c.recv(); err != nil || f.ID != 2 {
		t.Fatalf("the answer after a wake the request came late for: %+v, %v", f, err)
	}
}

// A wake frame makes the reader poll for the request it announces, even
// when the client had paused long enough for the reader to stop polling.
func TestWakeFrameMakesTheReaderPoll(t *testing.T) {
	ts := startServer(t, ServerOptions{SpinWait: time.Microsecond, WakeSpinWait: time.Minute})
	c := dialRaw(t, ts.socket)
	c.request(1, 0, batchOf("a/"))
	if f, err := c.recv(); err != nil || f.ID != 1 {
		t.Fatalf("first answer: %+v, %v", f, err)
	}
	time.Sleep(20 * time.Millisecond) // the reader waits past its window, then parks
	if n := ts.srv.spinSlots.n.Load(); n != 0 {
		t.Fatalf("%d readers polling after a pause", n)
	}
	c.send(Frame{Kind: KindWake})
	waitFor(t, "the reader to poll after a wake frame", func() bool { return ts.srv.spinSlots.n.Load() == 1 })
	c.request(2, 0, batchOf("b/"))
	if f, err := c.recv(); err != nil || f.ID != 2 {
		t.Fatalf("the announced request: %+v, %v", f, err)
	}
	waitFor(t, "the reader to stop polling once the request came", func() bool { return ts.srv.spinSlots.n.Load() == 0 })
}

// A woken reader polls while a call runs on another connection (each
// connection is a client waiting for its own answers), and no more
// readers poll at once than the server has Ps.
func TestReadersPollBesideARunningCall(t *testing.T) {
	// Polling only when a wake frame asks, and then for long.
	ts := startServer(t, ServerOptions{SpinWait: time.Microsecond, WakeSpinWait: time.Minute})
	slow := dialRaw(t, ts.socket)
	slow.request(1, 0, batchOf("sleep:300ms"))
	waitFor(t, "the slow call to start", func() bool { return ts.h.inFlight.Load() == 1 })
	procs := int32(runtime.GOMAXPROCS(0))
	var woken []*rawConn
	for range procs + 2 {
		c := dialRaw(t, ts.socket)
		c.request(1, 0, batchOf("a/"))
		if f, err := c.recv(); err != nil || f.ID != 1 {
			t.Fatalf("a quick call: %+v, %v", f, err)
		}
		c.send(Frame{Kind: KindWake})
		woken = append(woken, c)
	}
	waitFor(t, "a woken reader to poll beside the slow call", func() bool { return ts.srv.spinSlots.n.Load() >= 1 })
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		if n := ts.srv.spinSlots.n.Load(); n > procs {
			t.Fatalf("%d readers polling at once, more than the %d Ps", n, procs)
		}
		time.Sleep(100 * time.Microsecond)
	}
	for i, c := range woken {
		c.request(2, 0, batchOf("b/"))
		if f, err := c.recv(); err != nil || f.ID != 2 {
			t.Fatalf("woken connection %d: the announced request: %+v, %v", i, f, err)
		}
	}
	if f, err := slow.recv(); err != nil || f.ID != 1 {
		t.Fatalf("the slow call: %+v, %v", f, err)
	}
}

func TestRequestTimeoutReachesHandler(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := dialRaw(t, ts.socket)
	start := time.Now()
	c.request(1, 300*time.Millisecond, batchOf("x/"))
	if _, err := c.recv(); err != nil {
		t.Fatal(err)
	}
	d := <-ts.h.deadlines
	if left := d.Sub(start); left < 250*time.Millisecond || left > 2*time.Second {
		t.Errorf("handler deadline %v after the send, want about 300ms", left)
	}
	c.request(2, 0, batchOf("x/"))
	c.recv()
	if d := <-ts.h.deadlines; !d.IsZero() {
		t.Errorf("a request without a timeout got deadline %v", d)
	}
	// The timeout stops a slow call: its answer is the handler's error.
	c.request(3, 50*time.Millisecond, batchOf("sleep:10s"))
	f, err := c.recv()
	if err != nil || f.Kind != KindError {
		t.Fatalf("answer %+v %v, want an error frame", f, err)
	}
	if err := <-ts.h.ctxErrs; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("handler ctx ended with %v, want DeadlineExceeded", err)
	}
}

// A cancel frame, or the connection's end, cancels a long call's ctx (once
// the watchdog has handed the reading to a new goroutine).
func TestCancelFrameAndDisconnectCancelCalls(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := dialRaw(t, ts.socket)
	c.request(1, 0, batchOf("sleep:30s"))
	waitFor(t, "the call to start", func() bool { return ts.h.inFlight.Load() == 1 })
	c.send(Frame{Kind: KindCancel, ID: 1})
	select {
	case err := <-ts.h.ctxErrs:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ctx ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancel frame did not cancel the call")
	}
	if f, err := c.recv(); err != nil || f.ID != 1 || f.Kind != KindError {
		t.Errorf("a cancelled call's answer: %+v %v", f, err)
	}
	// A cancel for a call that is not in flight is ignored.
	c.send(Frame{Kind: KindCancel, ID: 99})
	c.request(2, 0, batchOf("ok/"))
	if f, err := c.recv(); err != nil || f.ID != 2 {
		t.Errorf("after a stray cancel: %+v %v", f, err)
	}

	// Once the watchdog sleeps (no call for a while), the next long call
	// wakes it.
	waitFor(t, "the watchdog to sleep", func() bool { return ts.srv.watchIdle.Load() })
	c.request(3, 0, batchOf("sleep:30s"))
	waitFor(t, "the call to start", func() bool { return ts.h.inFlight.Load() == 1 })
	c.nc.Close()
	select {
	case err := <-ts.h.ctxErrs:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ctx ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection's end did not cancel the call")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Misbehaving peers cost their own connection only: the server goes on
// serving a well-behaved one, which is checked after each.
func TestBadPeersCostTheirConnectionOnly(t *testing.T) {
	ts := startServer(t, ServerOptions{SniffTimeout: 200 * time.Millisecond, FrameTimeout: 200 * time.Millisecond, MaxFrameBytes: 1 << 20})
	good := dialRaw(t, ts.socket)
	id := uint64(0)
	check := func(what string) {
		t.Helper()
		id++
		good.request(id, 0, batchOf("ok/"))
		if f, err := good.recv(); err != nil || f.ID != id {
			t.Fatalf("after %s: the good connection got %+v %v", what, f, err)
		}
	}
	dial := func() net.Conn {
		nc, err := net.Dial("unix", ts.socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	closed := func(nc net.Conn, within time.Duration) bool {
		nc.SetReadDeadline(time.Now().Add(within))
		_, err := io.Copy(io.Discard, nc)
		return !errors.Is(err, os.ErrDeadlineExceeded) // EOF, or ECONNRESET when it left bytes unread
	}

	cases := []struct {
		name  string
		bytes []byte
		wait  time.Duration
	}{
		{"garbage first bytes", []byte("GET / HTTP/1.1\r\n\r\n"), time.Second},
		{"a TLS hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc}, time.Second},
		{"an unknown fast-lane version", []byte("INFBFL02"), time.Second},
		{"an HTTP/2 preface gone wrong", []byte("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"), time.Second},
		{"silence", nil, 5 * time.Second},
		{"a half magic, then silence", []byte("INFB"), 5 * time.Second},
		{"a garbage frame", append([]byte(Magic), bytes.Repeat([]byte{0xee}, 40)...), time.Second},
		{"a frame over the cap", append([]byte(Magic), header(1, 0, 0, 2<<20, 1, 0)...), time.Second},
		{"a frame a client may not send", append([]byte(Magic), AppendFrame(nil, Frame{Kind: KindResponse, ID: 1})...), time.Second},
		{"half a header, then silence", append([]byte(Magic), header(1, 0, 0, 10, 1, 0)[:7]...), 5 * time.Second},
		{"half a payload, then silence", append([]byte(Magic), append(header(1, 0, 0, 10, 1, 0), 1, 2, 3)...), 5 * time.Second},
	}
	for _, c := range cases {
		nc := dial()
		nc.Write(c.bytes)
		if !closed(nc, c.wait) {
			t.Errorf("%s: the connection was not closed", c.name)
		}
		check(c.name)
	}

	// A duplicate id of a call in flight closes the connection.
	dup := dialRaw(t, ts.socket)
	dup.request(7, 0, batchOf("sleep:30s"))
	dup.request(7, 0, batchOf("a/"))
	if !dup.closedByPeer(5 * time.Second) {
		t.Error("a reused id did not close the connection")
	}
	check("a reused id")

	// Disconnects in the middle of a frame.
	for _, cut := range []int{3, HeaderLen, HeaderLen + 2} {
		nc := dial()
		b, _ := proto.Marshal(batchOf("a/"))
		nc.Write(append([]byte(Magic), AppendFrame(nil, Frame{Kind: KindRequest, ID: 1, Payload: b})[:cut]...))
		nc.Close()
		check("a disconnect mid-frame")
	}
}

// The HTTP/2 preface goes to HTTP2Listener, whose reader gets every byte
// from the first one.
func TestHTTP2ConnectionsHandedOver(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	got := make(chan []byte, 1)
	go func() {
		nc, err := ts.srv.HTTP2Listener().Accept()
		if err != nil {
			got <- nil
			return
		}
		defer nc.Close()
		b := make([]byte, len(HTTP2Preface)+5)
		io.ReadFull(nc, b)
		got <- b
	}()
	nc, err := net.Dial("unix", ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte(HTTP2Preface + "hello"))
	select {
	case b := <-got:
		if string(b) != HTTP2Preface+"hello" {
			t.Errorf("the HTTP/2 side read %q", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no HTTP/2 connection handed over")
	}
	if ts.srv.HTTP2Listener().Addr().Network() != "unix" {
		t.Errorf("HTTP2Listener address %v", ts.srv.HTTP2Listener().Addr())
	}
}

// GracefulStop answers the calls in flight, refuses new connections and
// answers requests that arrive meanwhile with a GRPC error.
func TestGracefulStop(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	idle := dialRaw(t, ts.socket)
	idle.request(1, 0, batchOf("a/"))
	idle.recv()
	busy := dialRaw(t, ts.socket)
	busy.request(1, 0, batchOf("sleep:300ms", "b/"))
	done := make(chan error, 1)
	go func() {
		resp, err := c.Predict(context.Background(), batchOf("sleep:300ms"))
		if err == nil && len(resp.GetResult().GetResponses()) != 1 {
			err = errors.New("wrong answer")
		}
		done <- err
	}()
	waitFor(t, "both calls to start", func() bool { return ts.h.inFlight.Load() == 2 })
	stopped := make(chan struct{})
	go func() { ts.srv.GracefulStop(); close(stopped) }()
	if !idle.closedByPeer(5 * time.Second) {
		t.Error("an idle connection was not closed at once")
	}
	if nc, err := net.Dial("unix", ts.socket); err == nil {
		nc.Close()
		t.Error("a new connection was accepted during GracefulStop")
	}
	busy.request(2, 0, batchOf("late/"))
	for range 2 {
		f, err := busy.recv()
		if err != nil {
			t.Fatalf("busy connection: %v", err)
		}
		switch f.ID {
		case 1:
			if got := answerPaths(t, f); len(got) != 2 {
				t.Errorf("the call in flight answered %v", got)
			}
		case 2:
			var e inferencepb.Error
			proto.Unmarshal(f.Payload, &e)
			if f.Kind != KindError || e.GetType() != inferencepb.ErrorType_GRPC || !strings.Contains(e.GetDescription(), "shutting down") {
				t.Errorf("a request during the stop: %s %v", f.Kind, &e)
			}
		}
	}
	if err := <-done; err != nil {
		t.Errorf("the client's call in flight: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop did not return")
	}
	if !busy.closedByPeer(time.Second) {
		t.Error("the busy connection was not closed after its calls")
	}
	if err := <-ts.served; err != nil {
		t.Errorf("Serve after GracefulStop: %v", err)
	}
	ts.served <- nil // for the cleanup
}

func TestStopBeforeServe(t *testing.T) {
	srv, _ := NewServer(ServerOptions{Handler: newEchoHandler().handle, Logger: quiet})
	srv.Stop()
	lis, err := net.Listen("unix", testhelp.SocketPath(t, "x.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(lis); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Stop = %v, want ErrServerClosed", err)
	}
	if _, err := NewServer(ServerOptions{}); err == nil {
		t.Error("a server without a handler")
	}
}

// Stop closes every connection at once: a call in flight fails.
func TestStopFailsCallsInFlight(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := c.Predict(context.Background(), batchOf("sleep:30s")); done <- err }()
	waitFor(t, "the call to start", func() bool { return ts.h.inFlight.Load() == 1 })
	ts.srv.Stop()
	select {
	case err := <-done:
		if inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), ts.socket) {
			t.Errorf("call in flight at Stop: %v, want a GRPC error naming the socket", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call in flight outlived Stop")
	}
}

// A peer that does not read its answers is closed by the watchdog once a
// write has blocked past FrameTimeout.
func TestUnreadAnswersCloseTheConnection(t *testing.T) {
	big := &inferencepb.PredictResponse{DebugLogs: []string{strings.Repeat("x", 1<<20)}}
	var srvCalls atomic.Int64
	ts := startServer(t, ServerOptions{FrameTimeout: 300 * time.Millisecond, Handler: func(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		srvCalls.Add(1)
		return big, nil
	}})
	c := dialRaw(t, ts.socket)
	b, _ := proto.Marshal(batchOf("a/"))
	var frames []byte
	for id := range uint64(20) {
		frames = AppendFrame(frames, Frame{Kind: KindRequest, ID: id + 1, Payload: b})
	}
	c.nc.Write(frames)
	time.Sleep(time.Second) // read nothing: the server's writes block
	if !c.closedByPeer(10 * time.Second) {
		t.Error("the connection of a peer that reads nothing stayed open")
	}
	if srvCalls.Load() == 0 {
		t.Error("no call ran")
	}
	other := NewClient(ts.socket, ClientOptions{})
	defer other.Close()
	if _, err := other.Predict(context.Background(), batchOf("a/")); err != nil {
		t.Errorf("another client after that: %v", err)
	}
}

func TestConcurrentCallsOneClient(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := NewClient(ts.socket, ClientOptions{MaxConns: 8})
	defer c.Close()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 20 {
				path := strings.Repeat("p", g%7+1) + "/" + string(rune('a'+i%26))
				resp, err := c.Predict(context.Background(), batchOf(path))
				if err != nil {
					t.Error(err)
					return
				}
				if got := resp.GetResult().GetResponses(); len(got) != 1 || got[0].GetModelPath() != path {
					t.Errorf("asked %q, got %v", path, got)
					return
				}
			}
		})
	}
	wg.Wait()
	ts.srv.mu.Lock()
	n := len(ts.srv.conns)
	ts.srv.mu.Unlock()
	if n > 8 {
		t.Errorf("%d connections for a pool of 8", n)
	}
}
