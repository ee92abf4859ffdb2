// Command inferctl drives an inference sidecar over its Unix socket, and
// computes model checksums.
//
//	inferctl --socket PATH register --model-path P [--warmup FILE] LOCAL_FILE_OR_DIR
//	inferctl --socket PATH predict [FILE]        (batch JSON from FILE or stdin)
//	inferctl [--socket PATH] models [--server URL] [--json] [MODEL_PATH]
//	                                             (a table: state, checksum, loaded_at, inputs, outputs;
//	                                             --server asks a bidding-server's GET /v1/models)
//	inferctl --socket PATH delete --model-path P
//	inferctl checksum LOCAL_FILE_OR_DIR
//
// --socket defaults to $INFERENCE_SIDECAR_SOCKET.
//
// Exit codes: 0 success; 1 the operation failed (the error, with its type,
// goes to stderr; predict still prints the batch error JSON on stdout);
// 2 a bad command line. Per-entry errors of a batch are part of predict's
// answer (exit 0), as runInference returns them.
package main
