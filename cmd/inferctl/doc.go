// Command inferctl drives an inference sidecar over its Unix socket, and
// computes model checksums.
//
//	inferctl [--socket PATH] register --model-path P [--warmup FILE] LOCAL_FILE_OR_DIR
//	inferctl [--socket PATH] predict [--server URL] [--allow-entry-errors] [FILE]
//	                                             (batch JSON from FILE or stdin; --server runs it
//	                                             through a bidding-server's POST /v1/predict)
//	inferctl [--socket PATH] models [--server URL] [--json] [MODEL_PATH]
//	                                             (a table: state, checksum, loaded_at, inputs, outputs;
//	                                             --server asks a bidding-server's GET /v1/models)
//	inferctl [--socket PATH] delete --model-path P
//	inferctl checksum LOCAL_FILE_OR_DIR
//	inferctl variables [--json] SAVED_MODEL_DIR  (its checkpoint tensors: name, dtype, shape, bytes;
//	                                             reads variables/variables.index only)
//	inferctl export-variables --variable NAME --store redis-cluster://H:P[,H:P..] --model-path P [--restart] DIR
//	                                             (writes the variable's rows to the store under the keys the
//	                                             server reads; resumable, idempotent, progress on stderr)
//	inferctl --version
//
// Flags may come before or after the command and its arguments
// (`inferctl register DIR --model-path P --socket S`); "--" ends them.
// --socket defaults to $INFERENCE_SIDECAR_SOCKET; --timeout (default 5m)
// takes a Go duration or milliseconds. The subcommands are the commands
// table in main.go: one entry per command, each defining its own flags.
//
// Errors name their type, as the batch JSON contract does: a missing
// local model file or directory is MODEL_NOT_FOUND, an unreadable or
// invalid local input (batch file, --warmup file, model) INPUT_PARSING,
// each with the path.
//
// Exit codes: 0 success; 1 the operation failed (the error, with its type,
// goes to stderr; predict still prints the batch error JSON on stdout), or
// predict answered with an entry that failed (the answer is on stdout, the
// count and the first failure on stderr; --allow-entry-errors exits 0);
// 2 a bad command line.
package main
