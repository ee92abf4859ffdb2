// Package jsbridge runs an ad tech's JavaScript bidding module in a pool of
// goja runtimes and gives it inference: getModelPaths() and
// runInference(batchJson), exactly as docs/architecture.md and B&A define
// them.
//
// One module is compiled once (goja.Compile) and run in every runtime of the
// pool; a runtime is used by one goroutine at a time (goja runtimes are not
// safe for concurrent use). The pool size bounds how many calls run JS at
// once and defaults to GOMAXPROCS.
//
// runInference parses the batch JSON once on the host (batch.Parse), sends
// typed tensors to the sidecar (no JSON crosses the socket) and renders the
// response with batch.Render. It never throws: a non-string argument, an
// argument over the size bound, a parse failure or an unreachable sidecar all
// come back as the batch error JSON. As an extension it also accepts a plain
// JS object, walked directly into batch entries (no JSON.stringify/parse),
// with the same validation and messages as batch.Parse.
//
// The sandbox (docs/architecture.md, "The JS sandbox"): goja has no
// require, file system, network or process access, and the pool adds none;
// console.log/info/warn/error/debug go to slog.
//
//   - Isolation. Every call runs in a runtime that ran the module and
//     nothing else, taken from a set of ready runtimes that background
//     goroutines refill, and dropped afterwards: nothing one call writes
//     (globals, prototypes, replaced built-ins or host functions) reaches
//     another. Options.ShareRuntimes is the unsafe opt-out: warm runtimes
//     serving call after call.
//   - Deadlines. Every call runs on an executor goroutine under a deadline
//     enforced with Runtime.Interrupt. goja checks for an interrupt between
//     instructions, not inside a built-in, so a runtime still running
//     InterruptGrace after its interrupt (a catastrophic regular
//     expression, a huge join) is abandoned: the caller gets ErrDeadline
//     (with ErrAbandoned) on time, the runtime never serves again, and
//     while MaxAbandoned of them still run, calls fail at once with
//     ErrOverloaded. Regular expressions that run on regexp2 get a match
//     timeout (process-wide: the first pool's CallTimeout), which ends an
//     abandoned catastrophic match. The call-stack depth is bounded.
//   - Memory. goja cannot bound a runtime's heap. With Options.HeapBudget
//     a watchdog reads the Go heap every 10 ms and, while the live heap is
//     over HeapBudget plus HeapBaseline, stops the longest-running call
//     with ErrHeapBudget and drops its runtime. A single built-in call can
//     still allocate past the budget in one step (e.g. new ArrayBuffer(n),
//     "x".repeat(n)): a hard bound needs the JS in a process of its own.
//
// When Options.Inference is nil the two functions are absent, as in the
// reference when no sidecar is configured.
package jsbridge
