package sidecartest

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
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
