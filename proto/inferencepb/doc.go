// Package inferencepb is the Go code generated from proto/inference.proto
// (go generate ./proto/..., which runs scripts/gen-proto.sh; never edit the
// .pb.go files): the InferenceService gRPC contract between the bidding
// server (client) and one inference sidecar process (server) over a Unix
// socket. Predict takes either the B&A batch JSON or a typed batch of
// packed tensors; RegisterModelStream sends a model's files in chunks.
// Package sidecar implements the server and the client on top of it. The
// directive below also generates proto/kservepb.
package inferencepb

//go:generate ../../scripts/gen-proto.sh
