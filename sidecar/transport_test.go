package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/sidecar/fastlane"
	"github.com/inferbid/inferbid/tensor"
)

// The tests here run the key behaviours on both transports of
// Client.Predict and check they agree.

var transports = []Transport{TransportFastLane, TransportGRPC}

// clientFor is a second client of ts's socket with the given transport.
func (ts *testServer) clientFor(t *testing.T, tr Transport) *Client {
	t.Helper()
	c, err := NewClient(ts.socket, ClientOptions{Logger: quietLog, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTransportNames(t *testing.T) {
	for _, tr := range transports {
		got, err := ParseTransport(tr.String())
		if err != nil || got != tr {
			t.Errorf("ParseTransport(%q) = %v, %v", tr, got, err)
		}
	}
	if tr, err := ParseTransport(""); err != nil || tr != TransportFastLane {
		t.Errorf(`ParseTransport("") = %v, %v; want the fast lane`, tr, err)
	}
	if _, err := ParseTransport("http"); err == nil {
		t.Error(`ParseTransport("http") succeeded`)
	}
	if _, err := NewClient("/tmp/x.sock", ClientOptions{Transport: Transport(7)}); inferr.TypeOf(err) != inferr.GRPC {
		t.Errorf("an unknown transport: %v", err)
	}
	var zero ClientOptions
	if zero.Transport != TransportFastLane {
		t.Error("the zero ClientOptions do not pick the fast lane")
	}
}

// describe renders results for comparing transports.
func describe(res []batch.Result, err error) string {
	if err != nil {
		return fmt.Sprintf("error %s: %s", inferr.TypeOf(err), err)
	}
	var b strings.Builder
	for i, r := range res {
		fmt.Fprintf(&b, "%d %q: ", i, r.ModelPath)
		if r.Err != nil {
			fmt.Fprintf(&b, "%s: %s\n", inferr.TypeOf(r.Err), r.Err)
			continue
		}
		for _, t := range r.Tensors {
			fmt.Fprintf(&b, "%s %v %v; ", t.Name, t.Shape, t.Data)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Per-entry and whole-batch errors come back the same on both transports:
// same types, same messages.
func TestTransportsAgreeOnErrors(t *testing.T) {
	ts := startServer(t, ServerOptions{Limits: batch.Limits{MaxEntries: 8, MaxElements: 30}})
	registerAffine(t, ts.client, "a/", "2 1")
	ctx := context.Background()
	entries := []batch.Entry{
		{ModelPath: "a/", Tensors: x3(1, 2, 3, 4, 5, 6)},
		{ModelPath: "a/", Err: inferr.Errorf(inferr.InputParsing, "parsed badly on the host")},
		{ModelPath: "gone/", Tensors: x3(1, 2, 3)},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []int8{1, 2, 3})}},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{11, 3}, make([]float32, 33))}},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{2, 3}, []float32{1, 2, 3})}},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("nope", []int64{1, 3}, []float32{1, 2, 3})}},
	}
	many := make([]batch.Entry, 9)
	for i := range many {
		many[i] = batch.Entry{ModelPath: "a/", Tensors: x3(1, 2, 3)}
	}
	var got [2][2]string
	for i, tr := range transports {
		c := ts.clientFor(t, tr)
		res, err := c.Predict(ctx, entries)
		got[i][0] = describe(res, err)
		if err != nil || len(res) != len(entries) {
			t.Fatalf("%s: %v, %d results", tr, err, len(res))
		}
		errType(t, tr.String()+": unknown model", res[2].Err, inferr.ModelNotFound, "gone/")
		errType(t, tr.String()+": INT8 into FLOAT", res[3].Err, inferr.InputParsing, "INT8")
		errType(t, tr.String()+": over the element limit", res[4].Err, inferr.InputParsing, "30")
		errType(t, tr.String()+": unknown input", res[6].Err, inferr.InputParsing, "nope")
		_, err = c.Predict(ctx, many)
		errType(t, tr.String()+": too many entries", err, inferr.InputParsing, "9", "8")
		got[i][1] = describe(nil, err)
	}
	for j, what := range []string{"per-entry results", "the whole-batch error"} {
		if got[0][j] != got[1][j] {
			t.Errorf("%s differ:\nfast lane:\n%s\ngRPC:\n%s", what, got[0][j], got[1][j])
		}
	}
	// The request that is neither JSON nor typed: the same error too.
	_, fastErr := ts.client.fast.Predict(ctx, &inferencepb.PredictRequest{})
	_, grpcErr := inferencepb.NewInferenceServiceClient(ts.client.conn).Predict(ctx, &inferencepb.PredictRequest{})
	grpcErr = fromStatus(grpcErr)
	if inferr.TypeOf(fastErr) != inferr.InputParsing || describe(nil, fastErr) != describe(nil, grpcErr) {
		t.Errorf("empty request: fast lane %v, gRPC %v", fastErr, grpcErr)
	}
}

// ctxBackend's models block until their call's ctx ends and report how it
// ended.
type ctxBackend struct {
	started chan struct{}
	ended   chan error
}

type ctxModel struct{ b *ctxBackend }

func newCtxRuntime() (*runtimes.Runtime, *ctxBackend) {
	b := &ctxBackend{started: make(chan struct{}, 64), ended: make(chan error, 64)}
	return runtimes.NewRuntime("ctx", runtimes.Config{}, b), b
}

func (b *ctxBackend) Load(context.Context, runtimes.Files) (driver.Model, error) {
	return ctxModel{b}, nil
}
func (b *ctxBackend) Close() error { return nil }

func (m ctxModel) Signature() runtimes.Signature {
	return runtimes.Signature{
		Inputs:  []runtimes.TensorSpec{{Name: "x", DType: tensor.Float, Shape: []int64{-1, 3}}},
		Outputs: []runtimes.TensorSpec{{Name: "y", DType: tensor.Float, Shape: []int64{-1, 3}}},
	}
}

func (m ctxModel) Predict(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	m.b.started <- struct{}{}
	<-ctx.Done()
	m.b.ended <- ctx.Err()
	return nil, ctx.Err()
}

func (m ctxModel) Close() error { return nil }

// serveRuntime serves rt on a fresh socket; the test's end stops it.
func serveRuntime(t *testing.T, rt *runtimes.Runtime) *testServer {
	t.Helper()
	srv, err := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, socket: socketIn(t), served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve(ts.socket) }()
	ts.client = ts.clientFor(t, TransportFastLane)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.client.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Stop()
		<-ts.served
	})
	return ts
}

// A slow model: the caller gets its deadline error on time, and the
// model's ctx ends too (the deadline travels to the sidecar); a
// cancellation ends both as well.
func TestTransportsDeadlineAndCancel(t *testing.T) {
	rt, b := newCtxRuntime()
	ts := serveRuntime(t, rt)
	if err := ts.client.RegisterModel(context.Background(), "slow/", runtimes.Files{"m": []byte("m")}, ""); err != nil {
		t.Fatal(err)
	}
	in := []batch.Entry{{ModelPath: "slow/", Tensors: x3(1, 2, 3)}}
	for _, tr := range transports {
		c := ts.clientFor(t, tr)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := entryOrCallErr(c.Predict(ctx, in))
		took := time.Since(start)
		cancel()
		errType(t, tr.String()+": deadline", err, inferr.GRPC)
		if took < 190*time.Millisecond || took > 1500*time.Millisecond {
			t.Errorf("%s: a 200ms deadline returned after %v", tr, took)
		}
		select {
		case err := <-b.ended:
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: the model's ctx ended with %v", tr, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the model's ctx did not end after the deadline", tr)
		}
		<-b.started

		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			<-b.started
			time.Sleep(20 * time.Millisecond)
			cancel()
		}()
		start = time.Now()
		err = entryOrCallErr(c.Predict(ctx, in))
		errType(t, tr.String()+": cancel", err, inferr.GRPC)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: a cancelled call returned after %v", tr, took)
		}
		select {
		case err := <-b.ended:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: the model's ctx ended with %v after a cancel", tr, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the model's ctx did not end after a cancel", tr)
		}
	}
}

// entryOrCallErr is the call's error, or else its first entry's: the
// sidecar's own deadline (the same as the caller's) can answer an entry's
// GRPC error just before the caller's deadline timer fires, on either
// transport.
func entryOrCallErr(res []batch.Result, err error) error {
	if err == nil && len(res) > 0 {
		err = res[0].Err
	}
	return err
}

func TestTransportsConcurrentCallers(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	registerAffine(t, ts.client, "a/", "2 1")
	for _, tr := range transports {
		c := ts.clientFor(t, tr)
		var wg sync.WaitGroup
		var calls atomic.Int64
		for g := range 64 {
			wg.Go(func() {
				for i := range 25 {
					x := float32(g*100 + i)
					y, err := predictX(c, "a/", x)
					if err != nil {
						t.Errorf("%s: caller %d: %v", tr, g, err)
						return
					}
					if y != 2*x+1 {
						t.Errorf("%s: caller %d got %v for %v", tr, g, y, x)
						return
					}
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		if calls.Load() != 64*25 {
			t.Errorf("%s: %d calls succeeded of %d", tr, calls.Load(), 64*25)
		}
	}
}

// predictX runs the affine model on the row [x, x, x] and returns y[0].
func predictX(c *Client, path string, x float32) (float32, error) {
	res, err := c.Predict(context.Background(), []batch.Entry{{ModelPath: path, Tensors: x3(x, x, x)}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return 0, err
	}
	return res[0].Tensors[0].Data.([]float32)[0], nil
}

// Re-registrations under traffic: every call is answered by the old or
// the new model, never with an error.
func TestTransportsSwapUnderTraffic(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	registerAffine(t, ts.client, "a/", "2 1")
	for _, tr := range transports {
		c := ts.clientFor(t, tr)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var calls atomic.Int64
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					x := float32(g + i%5)
					y, err := predictX(c, "a/", x)
					if err != nil {
						t.Errorf("%s: during a swap: %v", tr, err)
						return
					}
					if y != 2*x+1 && y != 3*x+1 {
						t.Errorf("%s: y = %v for x = %v, from neither model", tr, y, x)
						return
					}
					calls.Add(1)
				}
			})
		}
		for i := range 20 {
			registerAffine(t, ts.client, "a/", []string{"3 1", "2 1"}[i%2])
		}
		close(stop)
		wg.Wait()
		if calls.Load() == 0 {
			t.Errorf("%s: no call ran during the swaps", tr)
		}
	}
}

// GracefulStop lets calls in flight on both transports finish and answer.
func TestTransportsGracefulStop(t *testing.T) {
	rt, b := newAffineRuntime()
	srv, err := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, socket: socketIn(t), served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve(ts.socket) }()
	ts.client = ts.clientFor(t, TransportGRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.client.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	registerAffine(t, ts.client, "slow/", "2 1 400ms")
	errs := make(chan error, 4)
	for _, tr := range transports {
		c := ts.clientFor(t, tr)
		for range 2 {
			go func() {
				y, err := predictX(c, "slow/", 1)
				if err == nil && y != 3 {
					err = fmt.Errorf("y = %v", y)
				}
				if err != nil {
					err = fmt.Errorf("%s: %w", tr, err)
				}
				errs <- err
			}()
		}
	}
	for b.Calls.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	srv.GracefulStop()
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("a call in flight at GracefulStop: %v", err)
		}
	}
	if err := <-ts.served; err != nil {
		t.Errorf("Serve after GracefulStop: %v", err)
	}
	if n := b.Live.Load(); n != 0 {
		t.Errorf("%d models open after GracefulStop", n)
	}
	_, err = ts.clientFor(t, TransportFastLane).Predict(context.Background(), []batch.Entry{{ModelPath: "slow/", Tensors: x3(1, 2, 3)}})
	errType(t, "after GracefulStop", err, inferr.GRPC)
}

// Peers that send garbage, stall or hang up mid-frame on the sidecar's
// socket cost their own connection only: both transports keep serving.
func TestSocketBadPeers(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	registerAffine(t, ts.client, "a/", "2 1")
	clients := []*Client{ts.clientFor(t, TransportFastLane), ts.clientFor(t, TransportGRPC)}
	check := func(what string) {
		t.Helper()
		for i, c := range clients {
			if y, err := predictX(c, "a/", 2); err != nil || y != 5 {
				t.Fatalf("after %s: %s: %v, %v", what, transports[i], y, err)
			}
		}
		if _, err := ts.client.ModelPaths(context.Background()); err != nil {
			t.Fatalf("after %s: ModelPaths: %v", what, err)
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
	closed := func(nc net.Conn) bool {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, nc)
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}
	check("nothing")
	for _, junk := range []string{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1", "INFBFL99", "PRI * HTTP/1.1\r\n\r\n\r\n\r\n\r\n\r\n"} {
		nc := dial()
		nc.Write([]byte(junk))
		if !closed(nc) {
			t.Errorf("first bytes %q: the connection stayed open", junk)
		}
		check(fmt.Sprintf("first bytes %q", junk))
	}
	// Silent and stalled peers hold their own connection only.
	silent := dial()
	stalledHello := dial()
	stalledHello.Write([]byte("INFB"))
	stalledFrame := dial()
	stalledFrame.Write(append([]byte(fastlane.Magic), fastlane.AppendHeader(nil, fastlane.Frame{Kind: fastlane.KindRequest, ID: 1}, 100)...))
	check("silent and stalled peers")
	_ = silent
	// Garbage after the magic, and hang-ups mid-frame.
	garbage := dial()
	garbage.Write(append([]byte(fastlane.Magic), strings.Repeat("\xee", 64)...))
	if !closed(garbage) {
		t.Error("a garbage frame: the connection stayed open")
	}
	check("a garbage frame")
	for _, cut := range []int{5, fastlane.HeaderLen, fastlane.HeaderLen + 3} {
		nc := dial()
		frame := fastlane.AppendFrame(nil, fastlane.Frame{Kind: fastlane.KindRequest, ID: 1, Payload: []byte("\x12\x10\x0a\x0e\x0a\x02a/\x12\x08")})
		nc.Write(append([]byte(fastlane.Magic), frame[:cut]...))
		nc.Close()
		check(fmt.Sprintf("a hang-up %d bytes into a frame", cut))
	}
}
