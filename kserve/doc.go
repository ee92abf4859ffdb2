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
// and BYTES. The sidecar carries FP32, FP64 and INT8-64 (the six types of
// the batch JSON contract); every other name is recognised and refused with
// a 400 naming the input and its datatype.
//
// Errors follow the batch contract's six types: INPUT_PARSING is a 400,
// MODEL_NOT_FOUND a 404, the rest a 500, each with the protocol's error
// object {"error": "..."}.
package kserve
