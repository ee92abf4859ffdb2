package sidecar

// The fast lane beside gRPC: on the server, one socket carries both (the
// fast lane's accept loop sniffs each connection and hands gRPC its own);
// on the client, Predict goes over the fast lane unless ClientOptions say
// otherwise. See package fastlane.

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sidecar/fastlane"
)

// Transport is how Client.Predict reaches the sidecar. Everything else
// (registration, deletion, model paths, health, PredictJSON) is gRPC.
type Transport int

const (
	// TransportFastLane sends typed batches as length-prefixed frames on
	// pooled connections to the sidecar's socket (package fastlane): the
	// default.
	TransportFastLane Transport = iota
	// TransportGRPC sends them as gRPC Predict calls.
	TransportGRPC
)

func (t Transport) String() string {
	switch t {
	case TransportFastLane:
		return "fastlane"
	case TransportGRPC:
		return "grpc"
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// ParseTransport reads "fastlane" or "grpc" ("" is the default, the fast
// lane).
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "", "fastlane":
		return TransportFastLane, nil
	case "grpc":
		return TransportGRPC, nil
	}
	return 0, fmt.Errorf("unknown sidecar transport %q: want fastlane or grpc", s)
}

func newFastLaneServer(s *Server) (*fastlane.Server, error) {
	return fastlane.NewServer(fastlane.ServerOptions{
		Handler:       s.fastPredict,
		Logger:        s.log,
		MaxFrameBytes: MaxMessageBytes,
		SpinWait:      s.opts.FastLaneSpinWait,
	})
}

// fastPredict is the fast lane's handler: predict, with Metrics only for
// consented requests (the ones that ask for diagnostics). The host's
// client (Client.Predict) never reads them, and encoding and decoding the
// map cost about as much CPU as the rest of a one-entry answer.
func (s *Server) fastPredict(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	return s.predict(ctx, req, req.GetIsConsented())
}

func newFastLaneClient(socket string, opts ClientOptions) *fastlane.Client {
	return fastlane.NewClient(socket, fastlane.ClientOptions{
		MaxConns:      opts.FastLaneConns,
		MaxFrameBytes: MaxMessageBytes,
		SpinWait:      opts.FastLaneSpinWait,
	})
}

// serve runs the fast lane's accept loop on lis and the gRPC server on the
// connections it hands over, until a stop. Like grpc.Server.Serve, it
// returns grpc.ErrServerStopped when the server was stopped before it
// began, and nil after a stop.
func (s *Server) serve(lis net.Listener) error {
	grpcDone := make(chan error, 1)
	go func() { grpcDone <- s.grpc.Serve(s.fast.HTTP2Listener()) }()
	err := s.fast.Serve(lis)
	if errors.Is(err, fastlane.ErrServerClosed) {
		<-grpcDone
		return grpc.ErrServerStopped
	}
	if err != nil {
		// Accept failed for good: the HTTP/2 listener is closed, so gRPC
		// stops serving too; stop it hard to release its connections.
		s.grpc.Stop()
		<-grpcDone
		return fmt.Errorf("sidecar: accept: %w", err)
	}
	// A stop: gRPC's Serve returns nil, or ErrServerStopped when the stop
	// came before it began; either way the stop was ours.
	<-grpcDone
	return nil
}
