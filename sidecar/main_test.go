package sidecar_test

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/fastlane"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// echoSocketEnv makes this test binary a raw Unix-socket echo server on the
// socket it names (the floor of BenchmarkTransports).
const echoSocketEnv = "INFERBID_TEST_ECHO_SOCKET"

// childSidecarEnv makes this test binary a sidecar serving the in-test
// affine runtime on its --socket (for the supervisor tests that need a slow
// model).
const childSidecarEnv = "INFERBID_TEST_CHILD_SIDECAR"

// privateDirEnv makes this test binary a host that creates a supervisor's
// private directory in the directory it names, prints its path and waits
// to be killed (for the stale-directory test).
const privateDirEnv = "INFERBID_TEST_PRIVATE_DIR_IN"

// TestMain removes the binaries the end-to-end tests built; re-executed
// with echoSocketEnv or childSidecarEnv set, it serves instead of running
// tests.
func TestMain(m *testing.M) {
	if path := os.Getenv(echoSocketEnv); path != "" {
		serveEcho(path)
		return
	}
	if parent := os.Getenv(privateDirEnv); parent != "" {
		dir, err := sidecar.MakePrivateDir(parent)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString(dir + "\n")
		select {}
	}
	if os.Getenv(childSidecarEnv) == "1" {
		os.Exit(sidecartest.ServeChild(os.Args[1:], sidecar.NewAffineRuntime()))
	}
	if os.Getenv(childSidecarEnv) == tensorflow.Name {
		os.Exit(serveTensorFlowChild())
	}
	testhelp.Main(m)
}

// buildBinary go-builds ./cmd/<name> of this module once per test run.
func buildBinary(t testing.TB, name string, cgo bool) string {
	t.Helper()
	return testhelp.BuildBinary(t, "cmd/"+name, cgo)
}

// serveEcho writes back whatever each connection sends, one read at a
// time, until the process is killed. It also serves the fast lane on
// path+".fl" with a handler that answers every request with a one-row
// result and does nothing else: the transport alone.
func serveEcho(path string) {
	fl, err := net.Listen("unix", path+".fl")
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	resp := &inferencepb.PredictResponse{Output: &inferencepb.PredictResponse_Result{Result: &inferencepb.BatchResult{
		Responses: []*inferencepb.ModelResponse{{ModelPath: "mlp/", Tensors: []*inferencepb.Tensor{{Name: "y", DataType: inferencepb.DataType_FLOAT, Shape: []int64{1, 1}, FloatData: []float32{0.5}}}}}}}}
	srv, err := fastlane.NewServer(fastlane.ServerOptions{Handler: func(context.Context, *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		return resp, nil
	}})
	if err != nil {
		os.Exit(1)
	}
	go srv.Serve(fl)
	lis, err := net.Listen("unix", path)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	for {
		c, err := lis.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}
