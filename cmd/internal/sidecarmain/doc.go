// Package sidecarmain is the body of every inference-sidecar-<runtime>
// binary: each cmd/ main blank-imports its runtime and runs Run with the
// runtime's name through cli.Main.
//
//	inference-sidecar-<runtime> --socket PATH [--runtime_config JSON]
//	    [--max_model_bytes N] [--max_batch_entries N] [--stop_grace 10s] [--log_level info]
//
// --runtime_config defaults to $INFERENCE_SIDECAR_RUNTIME_CONFIG. When
// $INFERENCE_SIDECAR_RLIMIT_MB is set the process caps its own address
// space (RLIMIT_AS) before it opens the runtime. SIGTERM or SIGINT (the end
// of Run's context) stop it gracefully: calls in flight finish (bounded by
// --stop_grace), then it exits 0.
//
// Exit codes: 0 after a stop, 1 when serving or the runtime fails, 2 for a
// bad command line or runtime config (Run returns a *cli.UsageError).
package sidecarmain
