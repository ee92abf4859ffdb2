// Package conformance is the test suite every inferbid runtime passes: one
// definition of "a runtime works", run by each runtime's own tests against
// real models of that runtime.
//
// A runtime's test calls
//
//	conformance.Run(t, open, conformance.Fixtures{AllDTypes: ..., AffineV1: ..., AffineV2: ..., RunningSum: ...})
//
// with open returning a freshly opened *runtimes.Runtime (each subtest gets
// its own, closed when the subtest ends) and four small models in its own format
// (see Fixtures): a six-dtype identity model, two versions of an affine
// model and a running sum with per-sequence state. Input names come from the loaded model's Signature; positional
// runtimes (Signature.Positional) get inputs by position, and when they do
// not report input dtypes, the six-dtype model must take them in contract
// order (DOUBLE, FLOAT, INT8, INT16, INT32, INT64).
//
// The subtests:
//
//   - LoadFromBytes: each fixture loads from a private copy of its bytes
//     under a model path; an empty file set is a typed load error.
//   - Signature: inputs and outputs are listed (inputs may be absent only for
//     positional runtimes), names are unique, each known dtype appears once,
//     and shapes are unknown or [-1|n, inner].
//   - AllDTypes: at batch 1, 8 and 64, every dtype goes through the identity
//     model with extreme values (int8 -128/127, int16 and int32 limits, int64
//     around ±2^62 and at its limits, 2^53+1; float and double extremes,
//     subnormals, -0; never NaN or Inf, which the batch JSON cannot carry).
//     Outputs are matched to inputs by dtype and compared bit for bit; the
//     inputs must be left unmodified.
//   - Affine: v1 (y = 2x+1) and v2 (y = 3x-1) at batch 1, 7 and 64 against
//     values the suite computes from the formula (relative tolerance 1e-6).
//   - BadInput: wrong input name, wrong dtype, wrong inner dimension, wrong
//     rank, content count mismatch, zero, negative and overflowing
//     dimensions, unsupported or nil data, no input, an input given twice:
//     each is INPUT_PARSING naming the model path (and the fault). For
//     positional runtimes names are ignored (a wrong name must still give the
//     right answer) and dtype or shape faults may surface as MODEL_EXECUTION
//     when the model runs. Never a panic; the model answers right afterwards.
//   - CorruptModel: every file of the model truncated (to half, by one byte,
//     to one byte, to nothing), replaced by deterministic garbage or by text,
//     or starting with bytes that are not UTF-8: each Load fails with a
//     MODEL_EXECUTION error naming the model path, in valid UTF-8, no panic.
//   - Concurrent: 64 goroutines call Predict at once on the affine and the
//     six-dtype models (run it with -race); every answer must be right.
//   - SwapWhileServing: goroutines serve v1 while v2 loads, v2 is published
//     and v1 is closed under them (what the sidecar does on re-registration).
//     Every answer is a correct v1 or v2 answer, or MODEL_NOT_FOUND from
//     runtimes.ErrClosed for a call that picked v1 as it closed; nothing else.
//   - Close: Close is idempotent, and Predict after Close is MODEL_NOT_FOUND
//     (runtimes.ErrClosed) naming the model path.
//   - Sequences (the running sum, from Fixtures.RunningSumStart): two
//     interleaved sequences keep their own sums while calls outside
//     sequences start from the initial state and disturb neither, and a
//     sequence begun later starts there too (Interleaved); 8 sequences run
//     at once, one goroutine each (Parallel); inputs that do not fit a
//     sequence call are INPUT_PARSING naming the model path (MODEL_EXECUTION
//     allowed for positional runtimes) and leave its sum alone (BadInput);
//     the affine model is not stateful and has no sequence state, a
//     MODEL_EXECUTION error (NoState); after Close, a sequence call and a
//     new state are MODEL_NOT_FOUND (Close). The state a runtime keeps and
//     how a caller may feed it outside sequences are each backend's own
//     tests.
//
// The same runtime behind a real sidecar over a Unix socket is the second
// part of the suite, sidecartest.RunConformance in package
// sidecar/sidecartest: this package imports only the portable layer
// (runtimes, runtimes/driver) and the leaf packages tensor and inferr, never
// a server, as go-cloud's drivertest imports only blob and its driver.
//
// In Run, MODEL_NOT_FOUND is what a closed model answers; unknown paths are
// the sidecar's business (sidecartest.RunConformance and the sidecar's own tests). Waits are
// bounded (a hung runtime fails, not stalls, the test) but nothing is
// timed: speed is measured by benchmarks.
package conformance
