// Package jsbridge runs an ad tech's JavaScript bidding module in a pool of
// goja runtimes and gives it inference: getModelPaths() and
// runInference(batchJson), exactly as docs/architecture.md and B&A define
// them.
//
// One module is compiled once (goja.Compile) and run in every runtime of the
// pool; a runtime is used by one goroutine at a time (goja runtimes are not
// safe for concurrent use), so the pool size bounds concurrency and defaults
// to GOMAXPROCS.
//
// runInference parses the batch JSON once on the host (batch.Parse), sends
// typed tensors to the sidecar (no JSON crosses the socket) and renders the
// response with batch.Render. It never throws: a non-string argument, an
// argument over the size bound, a parse failure or an unreachable sidecar all
// come back as the batch error JSON. As an extension it also accepts a plain
// JS object, walked directly into batch entries (no JSON.stringify/parse),
// with the same validation and messages as batch.Parse.
//
// The sandbox: goja has no require, file system, network or process access,
// and the pool adds none; console.log/info/warn/error/debug go to slog. Every
// call runs under a deadline enforced with Runtime.Interrupt, so an infinite
// loop in ad-tech code ends the call with ErrDeadline and the runtime goes
// back to the pool cleared and usable. Note that goja cannot interrupt its
// own built-ins (a single huge String.prototype.repeat runs to completion)
// and cannot bound JS heap memory; the call-stack depth is bounded.
//
// A runtime's globals persist across the calls it serves (a warm runtime);
// Options.IsolateCalls gives each call a fresh one instead, so no state
// passes from one call to the next.
//
// When Options.Inference is nil the two functions are absent, as in the
// reference when no sidecar is configured.
package jsbridge
