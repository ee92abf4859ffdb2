// Command bidding-server runs an ad tech's JavaScript bidding module
// (generateBid) in supervised JS worker processes (this binary re-executed;
// package jsworker), with ML inference served by a supervised inference
// sidecar and models synced from a bucket.
//
//	bidding-server --udf_code_path generate_bid.js \
//	  --inference_sidecar_binary_path bin/inference-sidecar-tensorflow \
//	  --inference_model_bucket_name file:///abs/examples/bucket \
//	  --inference_model_config_path model_config.json
//
// Every INFERENCE_* flag can also come from the environment variable of the
// same name in upper case; a flag on the command line wins. See -help.
//
// Without --udf_code_path it runs the embedded example module
// (examples/bidding/generate_bid.js). --buyer_code_fetch_config (env
// BUYER_CODE_FETCH_CONFIG, B&A's JSON) fetches the code instead from a
// bucket, where every blob is a code version a request may name, or from a
// URL, polls it and swaps changes in live (package codestore; README.md,
// "Bidding code from a bucket"). --inference_model_local_paths takes
// LOCAL or MODEL_PATH=LOCAL items; without MODEL_PATH the model path is
// LOCAL's base name, with a trailing "/" for a directory.
//
// HTTP API:
//
//	POST /v1/generateBids  {"interest_groups":[{"name":..},..], "auction_signals":..,
//	                        "per_buyer_signals":.., "trusted_bidding_signals":.., "browser_signals":..,
//	                        "code_version":..}  (a code version not served is a 400)
//	                       -> {"bids":[{"interest_group":N,"bid":..} or {"interest_group":N,"error":..}]}
//	                       "consented_debug_config":{"is_consented":true,"token":..} (with
//	                       --consented_debug_token: "debug_info":{"logs":[..]} in the answer);
//	                       groups run in chunks on the JS workers, answers keep the request order;
//	                       a body that is not JSON, lacks interest groups or is too large is a 400/413
//	                       with {"error":..}
//	GET  /v1/models        {"model_paths":[..],"inference_enabled":bool,"models":[{"model_path":..,
//	                       "state":"loading|serving|failed|draining","checksum":..,"loaded_at":..,
//	                       "last_error":..,"mapped_bytes":..,"copied_bytes":..,"external_variables":{..},
//	                       "inputs":[{"name":..,"dtype":..,"shape":[..]}],"outputs":[..]},..]}
//	                       (docs/architecture.md, "Model status over HTTP")
//	GET  /v1/models/{path} one model of the models array (e.g. /v1/models/pctr/v1/); 404 {"error":..}
//	GET  /v1/code          {"default":..,"versions":[{"name":..,"sha256":..,"size":..,"state":"default|serving|failed",
//	                       "loaded_at":..,"last_error":..},..]}: the bidding code versions
//	GET  /healthz          200 while the process serves (from the moment the port is bound)
//	GET  /readyz           200 once the module compiled, the sidecar is healthy (after a restart:
//	                       with every model replayed), the local models
//	                       registered and the bucket's config was read with every model it lists
//	                       attempted (a model that fails to load is logged, counted in /metrics
//	                       and retried with back-off; it does not hold readiness back); else 503 with
//	                       reasons ("starting: ...", the bucket's last error, "draining", the
//	                       sidecar's state: restarting, replaying, not answering its liveness
//	                       probe, crash-looping)
//	GET  /metrics          Prometheus: inferbid_inference_* (B&A's inference metrics),
//	                       inferbid_sidecar_restarts_total, inferbid_sidecar_unresponsive_total,
//	                       inferbid_sidecar_replay_duration_seconds, inferbid_sidecar_slow_replays_total,
//	                       inferbid_js_* (calls; the JS workers'
//	                       restarts, kills, deaths, bursts, busy and queued; in-process: abandoned
//	                       runtimes, overload refusals, heap stops), inferbid_code_*, inferbid_http_*, Go/process
//
// The JS sandbox (docs/architecture.md, "JS workers" and "The JS sandbox"):
// each request's calls run in fresh runtimes that never ran another
// request's (--js_isolate_calls=false shares them, and is unsafe), in worker
// processes under an address-space limit (--js_worker_rlimit_mb); a call
// gets its deadline error on time even when the script is stuck in a
// built-in (its worker is then replaced by a warm spare), requests take
// turns in time slices (--js_request_slice) under a JS time budget
// (--js_request_budget), and a call is stopped when its worker's heap passes
// --js_heap_budget_mb. --js_in_process runs the JS in the server instead,
// without hard bounds. A module that defines no generateBid function stops
// the server at start.
//
// Start-up binds the port first, then starts the sidecar, compiles the
// module and syncs the models in the background: meanwhile the API answers
// 503 and /readyz says what is not ready yet. A bucket that cannot be
// opened or whose config cannot be read is retried with exponential
// back-off (200ms doubling to the poll period, within 1s..30s), its error
// in /readyz and logged once (repeats at DEBUG). A sidecar that cannot
// start stops the server with exit status 1 and the sidecar's last stderr
// lines in the message.
//
// SIGTERM or SIGINT stop it gracefully: for --drain_period /readyz answers
// 503 "draining" while requests are still served (keep-alives end), then
// the listener closes, requests in flight finish (up to --shutdown_grace;
// past it the exit status is 1), then the sidecar gets SIGTERM.
//
// The listener holds at most --max_connections connections (more wait in
// the kernel's accept queue); --read_header_timeout, --read_timeout,
// --write_timeout and --idle_timeout bound each connection.
package main
