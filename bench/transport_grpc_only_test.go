//go:build cgo

package bench

import (
	"log/slog"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/sidecar"
)

// This file is the one place that picks the transports of the comparison.
//
// TODO(fastlane): once the fast lane is merged, replace this file with one
// where newClients returns
//
//	fast: sidecar.NewClient(socket, sidecar.ClientOptions{Logger: log}) // the default, sidecar.TransportFastLane
//	grpc: sidecar.NewClient(socket, sidecar.ClientOptions{Logger: log, Transport: sidecar.TransportGRPC})
//
// fastLaneRequestBytes returns the size of the fast-lane request for
// entries (what the raw-echo row sends), and transportNote says "fast lane".
// Until then both rows use the default client, which is gRPC.

// transportNote is printed in the table's header: what the fast-lane row is.
const transportNote = "fast-lane row = default client = gRPC (fast lane not merged yet); raw-echo sends the gRPC request's size"

// newClients returns the clients of the fast-lane row (the default
// transport) and of the grpc row, each with its own connection to socket.
func newClients(socket string, log *slog.Logger) (fast, grpc *sidecar.Client, err error) {
	fast, err = sidecar.NewClient(socket, sidecar.ClientOptions{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	grpc, err = sidecar.NewClient(socket, sidecar.ClientOptions{Logger: log})
	if err != nil {
		fast.Close()
		return nil, nil, err
	}
	return fast, grpc, nil
}

// fastLaneRequestBytes is the size of the fast-lane request for entries:
// the number of bytes the raw-echo row sends each way.
func fastLaneRequestBytes(entries []batch.Entry) int { return grpcRequestBytes(entries) }
