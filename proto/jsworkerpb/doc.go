// Package jsworkerpb is the Go code generated from proto/jsworker.proto (go
// generate ./proto/..., which runs scripts/gen-proto.sh; never edit the
// .pb.go file): the messages between bidding-server and its JS worker
// processes, carried as fast-lane frame payloads (package jsworker).
package jsworkerpb
