// Package sidecarmain is the body of every inference-sidecar-<runtime>
// binary: each cmd/ main blank-imports its runtime and runs Run with the
// runtime's name through cli.Main.
//
//	inference-sidecar-<runtime> --socket PATH [--runtime_config JSON]
//	    [--max_model_bytes N] [--max_batch_entries N] [--stop_grace 10s] [--log_level info]
//	    [--log_format text|json] [--map_variables_dir DIR] [--map_variables_min_bytes 64MiB]
//	    [--max_mapped_model_bytes 64GiB] [--map_variables_verify_crc]
//	    [--map_variables_gather_from_mapping] [--external_variables_cache_bytes 64MiB]
//	inference-sidecar-<runtime> --version
//
// The --map_variables_* flags let the TensorFlow runtime serve checkpoint
// data shards of at least the minimum (a negative minimum: never) from a
// read-only memory mapping: of the file a streamed registration was
// received into, in place, or, for a registration sent as bytes, of a
// copy written to DIR (default: the socket's directory) and unlinked at
// once; such files count against --max_mapped_model_bytes instead of
// --max_model_bytes. The CRC32C of the tensors of a shard mapped in place
// is checked only with --map_variables_verify_crc (it reads the whole
// file at load). Gathers over a mapped table read its rows with pread
// (RSS stays at the heap) unless --map_variables_gather_from_mapping
// (rows read through the mapping: hot rows cost less, RSS grows to most
// of the table). The other runtimes ignore them.
// --external_variables_cache_bytes bounds the local row cache of each
// store serving external variables (the TensorFlow runtime; negative: no
// cache).
//
// --runtime_config defaults to $INFERENCE_SIDECAR_RUNTIME_CONFIG. When
// $INFERENCE_SIDECAR_RLIMIT_MB is set the process caps its own address
// space (RLIMIT_AS) before it opens the runtime. SIGTERM or SIGINT (the end
// of Run's context) stop it gracefully: calls in flight finish (bounded by
// --stop_grace), then it exits 0.
//
// Logs go to stderr as logfmt, or as one slog JSON object per line with
// --log_format json (the default when $INFERENCE_SIDECAR_LOG_FORMAT=json,
// which the supervisor sets, so that it forwards each line as a structured
// record). A failure after the command line is parsed (a bad runtime
// config included) is logged at ERROR, "sidecar failed" with the cause in
// err, before the process exits. Durations are Go durations (5s) or plain
// milliseconds.
//
// Exit codes: 0 after a stop, 1 when serving or the runtime fails, 2 for a
// bad command line or runtime config (Run returns a *cli.UsageError).
package sidecarmain
