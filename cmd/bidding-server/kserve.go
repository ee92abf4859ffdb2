package main

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/kserve"
)

// newKServe makes the Open Inference Protocol (KServe v2) API: the same
// sidecar (set once it has started), the request bound of generateBids,
// readiness as /readyz says it, metrics labelled by protocol.
func newKServe(cfg config, srv *server, m *metrics) *kserve.Server {
	opts := kserve.Options{
		// --version's text without the leading name: "devel (commit ...) go1.x".
		ServerVersion: strings.TrimPrefix(cli.Version("bidding-server"), "bidding-server "),
		Timeout:       cfg.RequestTimeout,
		Ready:         srv.readyErr,
		Observe:       m.observeV2,
		LoadErrors:    srv.loadErrors,
	}
	if cfg.KServeModelRepository {
		srv.repo = newModelRepo(cfg, srv)
		opts.Repository = srv.repo
	}
	return kserve.New(opts)
}

// listenKServe binds --kserve_listen: an HTTP server of the v2 API alone,
// with the main listener's timeouts.
func listenKServe(cfg config, srv *server, logger *slog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.KServeListen)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v2", srv.v2.Handler())
	mux.Handle("/v2/", srv.v2.Handler())
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}, ln, nil
}

// stopGRPC stops the gRPC service gracefully, and at once after grace.
func stopGRPC(gs *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		gs.Stop()
	}
}
