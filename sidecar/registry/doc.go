// Package registry is the sidecar's model table: the models it serves by
// path, with what serves each one (its dynamic batcher, its sequences and
// their timers), behind one call, Predict, that the sidecar's transports
// share.
//
// It knows no transport: it imports neither gRPC nor the fast lane, so the
// same table serves package sidecar's gRPC server and its fast-lane
// adapter, and its behaviour (swaps under traffic, batching, sequences) is
// tested without a socket. Package sidecar keeps the protocol: the
// servers, the client and the supervisor.
//
// One entry per model. A published model is one immutable entry {model,
// batcher, sequences, metrics, meta}; readers take a snapshot of
// an immutable map of entries through an atomic pointer (no lock on the
// Predict path: one atomic load and a map lookup), writers copy the map
// under a mutex and publish the copy. A re-registration publishes a new
// entry and retires the old one in the background once its calls in
// flight have finished; a call that raced the swap (its model closed under
// it) retries on the new entry, so a swap never shows MODEL_NOT_FOUND.
// Registrations and deletions of one path are serialised (the last to
// arrive wins; nothing leaks).
//
// Register validates a registration (path, clean relative file paths,
// total size against MaxModelBytes and MaxMappedModelBytes: Tally), loads
// it through the runtime, runs its warm-up batch (WarmUpRuns times) and
// only then publishes it. RegisterDisk does the same for files received
// onto disk (the runtime reads them from there where it can).
//
// Settings are the sidecar's own part of the runtime config (the runtimes
// read runtimes.Config): dynamic_batching, stateful_models,
// shared_state_models and sequence_cleaner_poll_wait_minutes.
//
// Dynamic batching (batcher.go, off by default): a model whose settings
// turn it on gets a batcher that merges concurrent calls into one runtime
// call along the leading dimension and hands each caller its rows;
// whatever cannot be merged, or a merged call that fails, runs unbatched,
// so every caller gets the unbatched answer. A batch's delay is timed by a
// Linux timerfd (waketimer.go): Go's own timers cannot wait less than
// about a millisecond when every goroutine is parked.
//
// Sequences (sequences.go): a stateful model listed in stateful_models, or
// registered with its own sequence settings, keeps one state per client
// sequence (OpenVINO Model Server's sequence_id and sequence_control_input)
// in a sequence.Manager; a cleaner sweeps idle sequences every
// SequenceCleanerInterval. shared_state_models is the opt-out that runs
// every call of a stateful model on one shared state, as B&A does.
//
// Metrics (metrics.go): per-model histograms (end to end, queue and
// compute latency, rows per runtime call) in a Prometheus registry of
// their own (Gatherer), which the sidecar's GetMetrics answers.
package registry
