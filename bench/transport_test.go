//go:build cgo

package bench

import (
	"log/slog"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/fastlane"
)

// This file is the one place that picks the transports of the comparison.

// transportNote is printed in the table's header: what the fast-lane row is.
const transportNote = "fast-lane row = the default client (sidecar.TransportFastLane); raw-echo sends the fast-lane request's size"

// newClients returns the clients of the fast-lane row (the default
// transport) and of the grpc row, each with its own connections to socket.
func newClients(socket string, log *slog.Logger) (fast, grpc *sidecar.Client, err error) {
	fast, err = sidecar.NewClient(socket, sidecar.ClientOptions{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	grpc, err = sidecar.NewClient(socket, sidecar.ClientOptions{Logger: log, Transport: sidecar.TransportGRPC})
	if err != nil {
		fast.Close()
		return nil, nil, err
	}
	return fast, grpc, nil
}

// fastLaneRequestBytes is the size of the fast-lane request for entries
// (a frame header and the typed batch's PredictRequest): the number of
// bytes the raw-echo row sends each way.
func fastLaneRequestBytes(entries []batch.Entry) int {
	return fastlane.HeaderLen + grpcRequestBytes(entries) - 5 // gRPC's 5-byte message prefix
}
