// Package tfservingpb is the Go code generated from TensorFlow Serving's
// official API protos (proto/tfserving/tensorflow_serving, vendored
// unchanged from github.com/tensorflow/serving with its Apache-2.0 LICENSE;
// go generate ./proto/..., which runs scripts/gen-proto.sh; never edit the
// .pb.go files): package tensorflow.serving, with the services
// PredictionService and ModelService under their official names, so that
// any TF Serving client talks to inferbid's gRPC port. The TensorFlow
// framework messages they use (TensorProto, SignatureDef, Example, ...)
// are github.com/wamuir/graft's pure-Go types, which inferbid's TensorFlow
// runtime already reads SavedModels with. kserve serves the services.
package tfservingpb
