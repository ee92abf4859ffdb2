package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"golang.org/x/net/netutil"
)

// listen binds cfg.Listen and returns the HTTP server for srv, with the
// connection cap and the per-connection timeouts of cfg.
//
// At the cap, the listener stops accepting: further connections wait in
// the kernel's accept queue (or are refused once it is full) until one
// closes. Idle keep-alive connections count, and end after IdleTimeout.
func listen(cfg config, srv *server, logger *slog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("--listen: %w", err)
	}
	if cfg.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, cfg.MaxConnections)
	}
	httpSrv := &http.Server{
		Handler:           srv.handler(),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ConnState:         srv.metrics.connState,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return httpSrv, ln, nil
}
