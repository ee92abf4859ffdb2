// Package kserve serves the KServe Open Inference Protocol ("Predict
// Protocol - Version 2", the /v2 API of KServe, Triton, Seldon MLServer and
// OpenVINO Model Server) over the same sidecar call runInference uses.
//
// Server holds the protocol's core (health, server and model metadata,
// inference) independent of the transport; Server.Handler is its HTTP/REST
// surface. It takes no flags: cmd/bidding-server mounts it on its listener.
//
// Naming: a model path "NAME/VERSION/" with a VERSION of digits, optionally
// after a "v" ("pctr/v2/", "ctr/3"), is model NAME at version VERSION; any
// other path is a model named by the path without its trailing slash, with
// no version. A request without a version gets the newest version of the
// name: the highest number, as the bidding module picks the newest
// "pctr/vN/" getModelPaths lists (see Resolve).
//
// Data types: the protocol names BOOL, UINT8-64, INT8-64, FP16, FP32, FP64
// and BYTES, and the sidecar carries all of them to the runtimes; a datatype
// the runtime or the model cannot take is the runtime's INPUT_PARSING, a 400
// naming the input and its datatype. FP16 travels over gRPC only raw (the
// protocol has no typed field for it); BYTES over JSON only as UTF-8 text.
//
// Extensions: binary tensor data on HTTP (Inference-Header-Content-Length,
// binary_data_size, binary_data, binary_data_output), Triton's sequence
// parameters (sequence_id as a uint64 or a string, sequence_start,
// sequence_end, onto the same sequences as sequence_control_input; a
// string id maps to a uint64 by a keyed HMAC) and, when
// Options.Repository is set, the model repository (index, load, unload).
//
// TF Serving: TFServingPredictHandler serves its REST predict (columnar
// "inputs" and row "instances"); NewGRPCServer also registers its gRPC
// tensorflow.serving.PredictionService (Predict, GetModelMetadata) and
// ModelService (GetModelStatus), generated from its official protos
// (proto/tfservingpb), so one listener serves both protocols.
//
// Errors follow the batch contract's six types: INPUT_PARSING is a 400,
// MODEL_NOT_FOUND a 404, the rest a 500, each with the protocol's error
// object {"error": "..."}. A model the config lists whose load failed
// (Options.LoadErrors) answers 503 with its load error rather than "not
// known". The gRPC server also serves grpc.health.v1.Health, SERVING
// exactly when ServerReady is.
package kserve
