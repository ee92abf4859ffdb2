// Package jsworker runs the ad tech's JavaScript in supervised worker
// processes, so that no request can crash the server, starve the others or
// outlive its deadline.
//
// In-process goja cannot give hard bounds: a goroutine cannot be killed,
// goja cannot interrupt one long built-in call (a catastrophic regular
// expression, new Array(1e8+1).join("x") ran 18-26 s past a 2 s deadline),
// and Go's allocator cannot refuse one allocation (new ArrayBuffer(2**35)
// ends the process with "fatal error: runtime: out of memory"). B&A runs its
// JavaScript in separate sandboxed worker processes with memory limits for
// the same reason; so does inferbid.
//
// # Processes
//
// A Host (in bidding-server) starts Options.Workers worker processes (twice
// GOMAXPROCS by default: see DefaultWorkers), each
// the same binary re-executed with WorkerEnv set (its main calls Main), plus
// Options.Spares warm spares. A worker's connection to the host is one end
// of a socketpair (fd 3): no path, nothing another process can connect to.
// Each worker:
//
//   - applies its address-space limit (RLIMIT_AS, RlimitEnv; the host also
//     sets it with prlimit(2)) before anything else, and the JS heap budget
//     as its own watchdog and Go soft memory limit: a script that allocates
//     past the limit ends its own worker, nothing else;
//   - runs one jsbridge.Pool of size 1 (one call at a time), with its own
//     goja runtimes and its own fast-lane client straight to the inference
//     sidecar's socket, so runInference costs no extra hop. Only what the
//     host alone knows goes through it: getModelPaths (the replay set after a
//     sidecar restart) and, as the client's Fallback, a request the sidecar
//     could not be reached for or whose answer names a model it does not
//     have (the host's client waits out a replay);
//   - runs its Go code on one CPU (GOMAXPROCS 1, unless GOMAXPROCS is in
//     its environment): it runs one call at a time, so its goroutines
//     (the call's executor, the reader, the refill, the collector) take
//     turns instead of waking a second thread at each hand-off, and the
//     machine's other CPUs stay with the host, the sidecar and the other
//     workers. GOGC and GOMEMLIMIT in its environment override the
//     collector settings it derives from the heap budget;
//   - gets SIGKILL when the host dies (Pdeathsig), ignores SIGINT/SIGTERM
//     (the host stops it by hanging up), and exits when the host hangs up.
//
// # Protocol
//
// The fast lane's frames (sidecar/fastlane: a 24-byte header with kind,
// length, id and timeout, then a protobuf payload of proto/jsworker.proto):
// no third protocol. The host numbers its requests with odd ids, the
// worker with even ones. Host to worker: Config (id 1, the module's source
// and the pool's settings; the ConfigAck says whether the module loaded),
// then one BidsRequest at a time (a chunk of one request's interest groups)
// answered by a BidsResponse (one CallResult per group, the chunk's log
// lines when consented, the inference events for the host's metrics); a
// cancel frame cancels the running chunk. Worker to host: HostCall
// (model paths, or a Predict for the host's client), answered by HostAnswer
// or an error frame carrying the typed error (sidecar.ErrorToProto).
// Both ends read with a dedicated goroutine; a worker that answered a chunk
// polls its connection for the next one (fastlane.ExpectReader,
// Options.SpinWait) while chunks come back to back, so that a host sending
// the next chunk wakes nobody; otherwise both park in the network poller
// (Options.HostSpinWait makes the host poll for answers too; off by
// default). Polling pays only while a CPU is idle: the host marks a chunk
// BidsRequest.poll when it runs no more chunks at once than half its CPUs,
// and a worker given a chunk without it neither polls (for its next chunk,
// for the sidecar's answers) nor wakes the sidecar's reader to poll
// (sidecar.Client.SetPolling). Measured under load (4 clients of 20
// interest groups, 2 CPUs): request p99 46-60 -> 21-25 ms, at 2-4 µs more
// CPU per interest group (docs/architecture.md, "Cost per bid").
//
// # Scheduling: fair shares, one request per runtime
//
// GenerateBids splits a request's interest groups into RequestConcurrency
// ranges and queues the request. Requests wait in a round-robin queue; a free
// worker takes the next range of the request at the head, which goes to the
// back while it has more. A worker starts the calls of its chunk one after
// another for one Slice (10 ms) and hands the rest back, which joins the
// back of the queue: a request of 1,000 interest groups takes one slice of
// a worker at a time, between the slices of the others, instead of holding
// every runtime. A call that runs long still holds its worker until its
// deadline: by default a request runs on at most a quarter of the workers,
// which outnumber the cores twice, so that two such requests leave half the
// workers to the others and the kernel shares the cores. A request's JS
// time, summed over its chunks, is bounded by RequestBudget (twice the call
// timeout): its calls not started by then fail with ErrRequestBudget.
//
// A call that loops to its deadline holds its worker for the whole call
// timeout, which no slice can shorten. While requests wait, no worker is
// idle and workers have run one chunk for longer than BurstAfter (five
// slices), the host runs chunks on burst workers (the warm spare, then new
// ones; at most MaxBurst, the number of workers), one per long-held
// worker, and stops them when the long calls end: well-behaved requests go
// on being answered beside scripts that loop, at the cost of sharing the
// CPU with them.
//
// The privacy boundary is the user, i.e. one request: a chunk's calls run
// in one fresh runtime (jsbridge.Pool.CallJSONGroup), which never ran
// another request's calls; Request.IsolateCalls gives each call its own.
//
// # Code versions and live swaps
//
// A Host serves a set of code versions (Options.Modules, named modules, one
// the default); every worker loads every version at start (one
// jsbridge.Pool each, built eagerly so that a version that does not load
// is known before it serves and no request pays for a compile), and a
// Request picks one by name (Request.CodeVersion; an unknown name fails
// the request's groups with ErrUnknownVersion, never a fallback).
// Validate loads candidate modules in a fresh worker process and reports
// each one's error (a syntax error with its line and column, a top-level
// exception, a missing generateBid, a top level that hangs or kills its
// worker): untrusted top-level code never runs in the host. SetModules
// swaps a new set in live: it starts Workers new processes for it and,
// once all have loaded it, makes it current. A request runs whole in the
// set current when it was admitted: the old set's workers finish its
// requests, then stop; the spare is replaced by one of the new set. A swap
// briefly doubles the worker processes and fails no request.
//
// # Hard limits
//
// Every call has its deadline, enforced in the worker by goja's Interrupt.
// A call still running InterruptGrace after its interrupt is abandoned by
// the worker's pool: the worker answers the chunk at once (that call's
// deadline error, the rest of the request cut off) and exits (ExitTainted),
// and the host replaces it. A worker that cannot even answer (thrashing at
// its memory limit, stopped) is killed by the host when a chunk's answer is
// later than the slice (none for a chunk of one call), the call timeout,
// the grace and KillGrace: the chunk's calls fail with jsbridge.ErrDeadline
// (and ErrWorkerKilled) at once, without waiting for the kernel to tear the
// process down (hundreds of milliseconds for one holding gigabytes). A
// worker that dies (out of memory, its rlimit, a crash) fails only the chunk
// it held (ErrWorkerDied, naming the cause it printed, e.g. "fatal error:
// runtime: out of memory"), and the request's remaining calls are cut off
// as a hostile script's are. In every case a warm spare takes the worker's
// place at once, and a new spare starts in the background (with back-off
// while starts fail): a replacement never starts on the request path.
// There is no abandoned-runtime quota and no "overloaded" refusal.
//
// Tracing (Options.OTLPEndpoint; "" = off, at no cost): each worker exports
// its own spans over OTLP, a "generateBid" span per call (its index in the
// chunk and the code version; the error's kind, never its message) whose
// parent is the request's span, carried in BidsRequest.traceparent, and its
// sidecar client's "runInference" spans below it.
package jsworker
