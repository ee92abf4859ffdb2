// Package examples holds inferbid's sample bidding module, sample request and
// sample model bucket; the bidding module is embedded so bidding-server runs
// the demo with no --udf_code_path.
//
// The bucket is generated: go generate ./examples rewrites bucket/ with
// internal/genbucket, and TestBucketIsUpToDate fails when the committed
// files differ from what it writes.
package examples

//go:generate go run ./internal/genbucket -out bucket
