// Package kservepb is the Go code generated from
// proto/kserve/grpc_predict_v2.proto (by scripts/gen-proto.sh, which
// proto/inferencepb's go:generate directive runs; never edit the .pb.go
// files): the Open Inference Protocol's inference.GRPCInferenceService.
// Package kserve implements the server; any client generated from the
// protocol's published grpc_predict_v2.proto talks to it.
package kservepb
