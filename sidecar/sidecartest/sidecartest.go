package sidecartest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// healthWait bounds the wait for the in-process server to answer health
// checks (it answers in milliseconds; this only keeps a broken one from
// hanging the test).
const healthWait = time.Minute

// Serve starts a sidecar.Server with opts on a fresh socket and returns a
// client that has seen it healthy. When the test ends the client is closed
// and the server stopped gracefully; a Serve error then fails the test.
func Serve(tb testing.TB, opts sidecar.ServerOptions, clientOpts sidecar.ClientOptions) *sidecar.Client {
	tb.Helper()
	srv, err := sidecar.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	socket := testhelp.SocketPath(tb, "s.sock")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	tb.Cleanup(func() {
		srv.GracefulStop()
		if err := <-served; err != nil {
			tb.Errorf("sidecar Serve: %v", err)
		}
	})
	client, err := sidecar.NewClient(socket, clientOpts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), healthWait)
	defer cancel()
	if err := client.WaitHealthy(ctx); err != nil {
		tb.Fatalf("in-process sidecar never became healthy: %v", err)
	}
	return client
}

// ServeChild is the main of a test binary that a sidecar.Supervisor runs
// as its sidecar (the binary re-executed with an environment variable its
// TestMain checks): it reads the flags the supervisor passes, as the real
// sidecars do (--socket, --runtime_config, --fast_lane_spin_wait,
// --local_files_dir), serves
// rt on the socket until the process is killed, and returns the exit
// status: 2 for bad flags, 1 when serving fails.
func ServeChild(args []string, rt *runtimes.Runtime) int {
	fs := flag.NewFlagSet("test-sidecar", flag.ContinueOnError)
	socket := fs.String("socket", "", "")
	fs.String("runtime_config", "", "")
	spinWait := fs.Duration("fast_lane_spin_wait", 0, "")
	localFiles := fs.String("local_files_dir", "", "")
	if err := fs.Parse(args); err != nil || *socket == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "test sidecar: bad args", args, err)
		return 2
	}
	srv, err := sidecar.NewServer(sidecar.ServerOptions{Runtime: rt, FastLaneSpinWait: *spinWait, LocalFilesDir: *localFiles})
	if err == nil {
		err = srv.Serve(*socket)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test sidecar:", err)
		return 1
	}
	return 0
}
