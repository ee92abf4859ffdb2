// Command kservegrpc is a small Open Inference Protocol (KServe v2) gRPC
// client of the example pCTR model, written against the Go code generated
// from the protocol's proto (proto/kservepb): it checks that the server is
// ready, prints the model's metadata, and runs one inference with raw
// input contents.
//
//	go run ./examples/kservegrpc --addr 127.0.0.1:8082 --model pctr
//
// bidding-server serves the protocol's gRPC service with
// --kserve_grpc_listen; see the README.
package main
