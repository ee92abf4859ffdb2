// Command genbucket writes the sample model bucket examples/bucket: pCTR and
// pCVR TensorFlow SavedModels made by tfsave (no TensorFlow needed) and a
// model_config.json whose checksums are computed from the written files.
//
//	go run ./examples/internal/genbucket -out examples/bucket
//
// go generate ./examples runs it so (the directive is in package examples).
// The output is deterministic; examples' tests regenerate it and compare.
package main
