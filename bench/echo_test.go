//go:build cgo

package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

// echoEnv, set to a socket path, makes the test binary an echo server on
// that socket (TestMain): the raw-echo row's child process. The test binary
// is also the js-worker row's worker process (jsworker.WorkerEnv set by the
// host that starts it; runJSWorker).
const echoEnv = "INFERBID_BENCH_ECHO_SOCKET"

func TestMain(m *testing.M) {
	if jsworker.IsWorker(os.Getenv) {
		os.Exit(jsworker.ExitCode(jsworker.Main(context.Background(), os.Getenv, os.Stderr), os.Stderr))
	}
	if socket := os.Getenv(echoEnv); socket != "" {
		os.Exit(runEchoServer(socket))
	}
	code := m.Run()
	testhelp.RemoveBinaries()
	os.Exit(code)
}

// runEchoServer serves the echo protocol on socket until its stdin closes
// (the parent ended, however it ended). A message is a 4-byte big-endian
// length and that many bytes; the answer is the same message, sent with one
// write, as a transport answers a request.
func runEchoServer(socket string) int {
	l, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo server:", err)
		return 1
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		l.Close()
		os.Exit(0)
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return 0
		}
		go func() {
			defer c.Close()
			var msg []byte
			for {
				var hdr [4]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				n := int(binary.BigEndian.Uint32(hdr[:]))
				if cap(msg) < 4+n {
					msg = make([]byte, 4+n)
				}
				msg = msg[:4+n]
				copy(msg, hdr[:])
				if _, err := io.ReadFull(c, msg[4:]); err != nil {
					return
				}
				if _, err := c.Write(msg); err != nil {
					return
				}
			}
		}()
	}
}

// echoServer is the echo child process.
type echoServer struct{ socket string }

// startEcho starts this test binary as an echo server on a fresh socket; it
// stops when the test ends.
func startEcho(tb testing.TB) *echoServer {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	socket := testhelp.SocketPath(tb, "echo.sock")
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), echoEnv+"="+socket)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
			return &echoServer{socket: socket}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("echo server did not come up on %s: %v", socket, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// echoConn is one connection to the echo server, sending n-byte messages.
type echoConn struct {
	c        net.Conn
	out, in  []byte
	wantSize uint32
}

// dial connects to the echo server for messages of n bytes (plus the
// 4-byte length); the connection closes when the test ends.
func (e *echoServer) dial(tb testing.TB, n int) *echoConn {
	tb.Helper()
	c, err := net.Dial("unix", e.socket)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	out := make([]byte, 4+n)
	binary.BigEndian.PutUint32(out, uint32(n))
	for i := range n {
		out[4+i] = byte(i)
	}
	return &echoConn{c: c, out: out, in: make([]byte, 4+n), wantSize: uint32(n)}
}

// roundTrip sends the message and reads the echo.
func (c *echoConn) roundTrip() error {
	if _, err := c.c.Write(c.out); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.c, c.in); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(c.in) != c.wantSize {
		return errors.New("echo: answer of the wrong size")
	}
	return nil
}

// grpcRequestBytes is the size of entries' Predict request on the gRPC
// transport: the typed PredictRequest message (as sidecar.Client.Predict
// builds it) with gRPC's 5-byte message prefix; HTTP/2 framing is not
// counted.
func grpcRequestBytes(entries []batch.Entry) int {
	b := &inferencepb.Batch{}
	for _, e := range entries {
		req := &inferencepb.ModelRequest{ModelPath: e.ModelPath}
		for _, t := range e.Tensors {
			p := &inferencepb.Tensor{Name: t.Name, DataType: inferencepb.DataType(t.DType()), Shape: t.Shape}
			switch d := t.Data.(type) {
			case []float64:
				p.DoubleData = d
			case []float32:
				p.FloatData = d
			case []int64:
				p.Int64Data = d
			default:
				panic(fmt.Sprintf("grpcRequestBytes: %s tensors are not in the comparison", t.DType()))
			}
			req.Tensors = append(req.Tensors, p)
		}
		b.Requests = append(b.Requests, req)
	}
	return 5 + proto.Size(&inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: b}})
}

func TestEchoRoundTrip(t *testing.T) {
	e := startEcho(t)
	for _, n := range []int{0, 1, 300, 1 << 16} {
		c := e.dial(t, n)
		for range 3 {
			if err := c.roundTrip(); err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if !bytes.Equal(c.in, c.out) {
				t.Fatalf("%d bytes: the echo differs from the message", n)
			}
		}
	}
}
