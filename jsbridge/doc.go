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
// require, file system, network or process access, and the pool adds none.
//
//   - Isolation. Every CallJSON runs in a runtime that ran the module and
//     nothing else, taken from a set of ready runtimes that background
//     goroutines refill, and dropped afterwards: nothing one call writes
//     (globals, prototypes, replaced built-ins or host functions) reaches
//     another. Options.ShareRuntimes is the unsafe opt-out: warm runtimes
//     serving call after call (one whose call was interrupted, panicked or
//     was stopped for the heap is replaced).
//   - Groups. The privacy boundary is the user: one generateBids request.
//     CallJSONGroup runs the calls of one request (one per interest group)
//     in one fresh runtime, one after another, under one pool slot: what a
//     call leaves is seen by the request's later calls and by no other
//     request, and the request pays for one runtime instead of one per
//     call (BenchmarkGroup). A call that leaves the runtime broken (a
//     panic, an interrupt, a heap stop) makes the next take a fresh one;
//     GroupOptions.IsolateCalls gives every call its own. Each call has its
//     own deadline. After an abandoned or heap-stopped call the script is
//     taken as hostile and the group's remaining calls fail with ErrCutOff;
//     GroupOptions.Slice bounds how long a group keeps starting calls
//     (the rest fail with ErrNotRun, for the caller to requeue), so that
//     requests share the pool fairly.
//   - Promises. A promise or thenable the function returns is awaited
//     (CallJSON and groups; Do hands body what the function returned).
//     goja runs its job queue whenever a call returns to Go, so a promise
//     that can settle has settled then: its value is the result, a
//     rejection a *ScriptError ("Uncaught (in promise) ..."), and a promise
//     still pending fails with ErrUnsettled (there are no timers or I/O
//     that could settle it later). A thenable's then is called once with
//     resolving functions and the job queue run after it. All of it runs
//     under the call's deadline.
//   - Console. console.log/info/debug/warn/error format their arguments
//     (objects as JSON, 4 KiB at most per line) and send the line, with
//     slog's level for the method, to the ConsoleSink of the call's ctx
//     (WithConsole), e.g. for the response of the request that made it.
//     Without a sink the line goes nowhere: console output is one user's
//     data, not the operator's. Options.LogConsole (unsafe, for local
//     development) sends lines without a sink, and those of the module's
//     top level, to the log. A sink gets no line after its call returned,
//     even from a runtime abandoned in a built-in that keeps logging.
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
// WebAssembly (wasm.go, wasm_api.go, wasm_prelude.js): every runtime has
// the WebAssembly JS API as B&A's V8 offers it to bidding code: Module,
// Instance (exports: functions over i32, i64 as BigInt, f32 and f64;
// memories whose buffer is an ArrayBuffer over the linear memory itself;
// globals), Memory, Global, validate, compile, instantiate (promises,
// settled by the job queue before the call returns), Module.exports,
// imports and customSections, JS functions as imports, and the
// CompileError, LinkError and RuntimeError classes, with V8's trap
// messages. It runs on wazero (github.com/tetratelabs/wazero, pure Go, no
// cgo; its compiler on amd64 and arm64, else its interpreter) rather than
// on a hand-written interpreter: a Wasm engine is a validator, a compiler
// and a runtime that each must be exactly right on hostile input, which
// wazero's spec-test-passing implementation is and a few hundred lines of
// ours would not be, and its compiled code is what makes a helper worth
// calling. The part written here is the JS binding: converting values,
// making exports and imports, and holding the sandbox:
//
//   - One wazero.Runtime per pool. Compiled modules are cached per pool by
//     content (up to 256 modules and 64 MiB of their bytes; code holds no
//     script data) and shared by every runtime; Options.WasmHelper is
//     compiled once, in New, and handed to
//     each call of WasmHelperArg's function (by default generateBid's
//     browserSignals) as its wasmHelper property, a WebAssembly.Module.
//     The namespace itself is made on a runtime's first read of the global
//     WebAssembly (about 40 µs), or ahead by the refillers when the pool
//     has a helper.
//   - Instances belong to the run that made them: the module's top level,
//     or one call. When the run ends its instances (memories, globals) are
//     closed and the memory buffers it handed out detached, so that no Wasm
//     state reaches the next call, even in a runtime that serves several
//     (a group, ShareRuntimes): an instance kept in a global then throws a
//     RuntimeError, its buffer reads as empty. So do the run's other Wasm
//     objects (memories, globals, tables, and Modules made in a call);
//     Modules made by the module's top level stay usable in every call
//     (compiled code holds no call's data). Past the cache's bounds,
//     a module is compiled for its run only (one of the top level: for
//     its runtime, closed when the runtime is garbage).
//   - Deadlines: instances run under the call's ctx with wazero's
//     close-on-context-done, so that a Wasm loop stops (wazero checks at
//     function entries and loop back-edges) when the call's deadline
//     passes or the heap watchdog stops it, and the call ends with the
//     pool's error, on time. A JS import that loops is interrupted as any
//     JS.
//   - Memory: the linear memories of one run's instances together are
//     bounded by WasmMaxMemoryBytes (1 GiB): memory.grow past it returns
//     -1, an instance or a Memory whose initial size does not fit is a
//     RangeError. They are Go slices (wazero's memory allocator hook), so
//     the heap watchdog counts them as it counts JS values. A memory grows
//     into a slice of twice its size (a page at a time would copy it each
//     time): a memory of N bytes may hold up to 2N while it grows.
//   - Tables: a table declaring more than WasmMaxTableElements (10 million,
//     V8's limit) fails to instantiate with a RangeError, so do a module's
//     tables declaring more together (stricter than V8, which bounds each:
//     many tables would allocate their sum in one step), and every table's
//     maximum is lowered to it (table.grow past it returns -1), by
//     rewriting the table section before wazero compiles it.
//   - Nothing else is reachable: no WASI, no host module but the JS
//     imports of the instance itself, no start function but the module's.
//
// As in V8, memory.grow (from Wasm, or Memory.prototype.grow) detaches the
// ArrayBuffer that memory.buffer returned before: views over it read as
// empty, and memory.buffer returns a new one over the grown memory. The
// old buffer is detached when JS can next see it (after the Wasm call
// returns, on entry to a JS import, on the next read of memory.buffer),
// which no script can tell from V8's detaching at the grow itself.
//
// Recursion: wazero grows a call's Wasm stack up to a fixed ceiling of 400
// MB (a constant of wazero's) before the RangeError; unbounded recursion
// takes about 100 ms and that much memory (Go heap, which the heap
// watchdog counts), where V8 stops at about 1 MB. The deadline stops it (a
// function entry checks too), once a stack copy in progress is done.
//
// What is not there: importing memories, tables or globals (a LinkError
// says so; functions only), the Table API beyond new Table and length,
// WebAssembly.Tag/Exception, compileStreaming/instantiateStreaming (no
// fetch), v128 and reference types at the JS boundary (a TypeError, as in
// V8 for v128).
//
// JSON: every runtime's JSON.parse and JSON.stringify are the native Go
// replacements of package nativejson (jsbridge/nativejson), installed
// before the module runs: about a third of goja's time on the peer
// comparison's request at batch 64, and indistinguishable from goja's by
// any script but for a nesting bound of nativejson.MaxDepth levels (see that
// package's doc).
//
// The host's own parse and stringify (CallJSON's arguments and result,
// console output, runInference's object argument) use these functions,
// captured before the module runs: a module that replaces JSON does not
// change them. Like goja's, the native functions cannot be interrupted
// mid-call.
//
// When Options.Inference is nil the two functions are absent, as in the
// reference when no sidecar is configured.
package jsbridge
