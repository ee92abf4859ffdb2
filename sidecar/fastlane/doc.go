// Package fastlane is the data plane for Predict between the host and the
// inference sidecar: typed batches (inferencepb.PredictRequest) travel as
// length-prefixed frames on persistent connections to the sidecar's Unix
// socket. It sits beside the gRPC service, which keeps registration,
// deletion, model paths, health and the JSON Predict of the tools, and
// remains a fallback for Predict (sidecar.TransportGRPC). The package uses
// protobuf and inferr, no gRPC API (proto/inferencepb, which holds the
// messages, holds the generated gRPC stubs too), and is pure Go.
//
// # One socket
//
// The sidecar listens on one Unix socket (mode 0600 in a 0700 directory;
// it opens no network socket), and everything keeps that one path.
// Server.Serve accepts on it and reads the first bytes of each new
// connection, in that connection's own goroutine and within SniffTimeout
// (10s), so a silent peer never holds up Accept:
//
//   - the 8 bytes of Magic, "INFBFL01" ("INFB" inferbid, "FL" fast lane,
//     "01" the protocol version): a fast-lane connection, served here;
//   - the 24-byte HTTP/2 client preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
//     (every gRPC connection opens with it): handed, with the bytes read so
//     far replayed, to HTTP2Listener, a channel-backed net.Listener that
//     the sidecar gives to grpc.Server.Serve;
//   - anything else, or too little in time: closed, and logged at warn.
//
// A new protocol version gets a new magic, which an older server closes. A
// client writes Magic once, in the same write as its first frame.
//
// # Frames
//
// A frame is a 24-byte header and a payload:
//
//	offset size field
//	0      1    kind: 1 request, 2 response, 3 error, 4 cancel, 5 wake
//	1      1    flags: 0 (version 01 defines none)
//	2      2    reserved: 0
//	4      4    payload length in bytes (at most the cap)
//	8      8    id: chosen by the client, unique among its calls in
//	            flight on the connection; an answer or a cancel repeats it
//	16     8    timeout in microseconds: the time left to the caller's
//	            deadline when it sent the request; 0 = none, and 0 in
//	            every kind but a request
//
// Integers are little-endian (both ends run on one host). The payloads:
//
//	request  client→server  a PredictRequest (the host sends typed batches)
//	response server→client  the PredictResponse to the request with that id
//	error    server→client  an Error{type, description}: the whole call failed
//	cancel   client→server  empty: cancel the call with that id (it is still
//	                        answered, typically with a GRPC error)
//	wake     client→server  empty, id 0: a request is likely to follow; the
//	                        reader polls for it (WakeSpinWait) rather than
//	                        parking. Nothing answers it (Client.Wake)
//
// A header with an unknown kind, non-zero flags or reserved bytes, a
// timeout outside a request, a payload on a cancel or a wake, an id on a
// wake, or a length over the
// cap ends the connection before anything is allocated. The cap is
// DefaultMaxFrameBytes, sidecar.MaxMessageBytes (512 MiB), so the fast lane
// carries whatever the gRPC path does; a payload over 1 MiB is allocated
// as its bytes arrive. Once a frame has started it must arrive within
// FrameTimeout (10s). A peer that sends garbage, stalls mid-frame or hangs
// up mid-frame costs its own connection, nothing else.
//
// # Semantics
//
// The sidecar runs a request with the function behind its gRPC Predict
// (typed path, per-entry errors, limits, registry lookup, the retry on an
// atomic swap, debug logs; the sidecar fills the metrics map only for
// consented requests here), under a context that carries the
// request's timeout and ends when the connection ends or a cancel frame
// for it arrives. The answer is a response frame, or an error frame that
// carries exactly the inferr type and message the gRPC status would (see
// the sidecar's toStatus and fromStatus): a whole-batch error such as "too
// many entries" reads the same on both transports; per-entry errors travel
// inside the PredictResponse, as on gRPC. Every error the client returns
// is typed; a call that cannot reach the sidecar, fails in transport, is
// cancelled or runs past its deadline is a GRPC error naming the socket.
//
// # Server
//
// A connection has one reading goroutine, and a request runs on it: no
// goroutine starts per call and no timer is armed per call (both cost
// microseconds, measured below). While a call runs, its connection is not
// read; a watchdog goroutine, ticking every handoffDelay (5ms) while calls
// or writes are in flight (and asleep after half a second without any),
// starts a new reading goroutine for a connection whose call has run past handoffDelay, so
// that cancel frames and the connection's end reach long calls within
// about 10ms (calls that short are not worth stopping: the ONNX backend
// arms its own cancellation only past 1ms). A request that finds another
// frame already buffered behind it gets a goroutine of its own at once, so
// pipelined requests run concurrently. Answers are written under the
// connection's write lock; the watchdog closes a connection whose write
// has blocked past FrameTimeout (a peer that does not read). GracefulStop
// stops accepting, answers the calls in flight, answers requests that
// arrive meanwhile with a GRPC "shutting down" error, and closes each
// connection as it falls idle; Stop closes everything at once.
//
// # Client
//
// Client is a pool of connections, dialled lazily (NewClient does no I/O).
// A call checks out an idle connection (the most recently used) or dials
// one, writes its request, reads its answer on the calling goroutine and
// checks the connection back in: no hand-off between goroutines on the
// way. The pool holds at most MaxConns connections (4*GOMAXPROCS); callers
// beyond them wait for one, or for their deadline.
//
// The ctx deadline travels in the request and bounds the local wait: a
// context.AfterFunc sets a past deadline on the connection when the ctx
// ends (its deadline included: the ctx's own timer fires then), which
// unblocks the read; no deadline is set on the connection per call. A call
// whose ctx ended, or whose deadline passed before the answer was in,
// returns the ctx's error, and its connection is closed rather than reused
// when the ctx's end may have interrupted its I/O; closing it ends the
// call on the sidecar too. A call that fails on a pooled connection before
// any byte of its answer arrived (EOF, EPIPE, ECONNRESET: the sidecar
// restarted) drops the idle connections and is retried once on a new one;
// a refused dial fails at once.
//
// # Polling before parking
//
// Both ends poll their socket for a short while (DefaultSpinWait, 50µs)
// before they park in the network poller: the client for its answer, the
// server's reader for the next request (only while the client sends back
// to back). Across two processes most of a short round trip is the
// wake-up of the side that parked, and a reader that polls needs none.
// Polling is bounded in time, in number (one reader per client process,
// one per P in a server), by need and by yielding the CPU between polls
// (raw system calls, see rawio.go); DefaultSpinWait gives the
// measurements and ClientOptions/ServerOptions.SpinWait turn it off.
// ExpectReader is the same polling for a connection that a dedicated
// goroutine reads all the time (a JS worker's, both ends): it polls only
// while its owner expects a frame (Expect), waking a parked read to do so,
// and shares the one polling slot of the process.
//
// # Why this design, and what was measured
//
// On the development machine (2 vCPUs shared with other work), a gRPC
// unary Predict of a one-row MLP over the socket took 115-190µs p50,
// against 8-9µs p50 for a raw 96-byte echo between two processes
// (sidecar.BenchmarkTransports). The fast lane pays what the echo pays (one
// write and one wake-up each way, two processes) plus its own work, which
// was cut down by measurement (BenchmarkRoundTrip, client and server in
// one process, where a raw echo takes 2.9µs p50):
//
//   - a goroutine per request, deadlines set on the connection per call
//     and a timer per request: 10.6µs p50. The profile showed the new
//     goroutine growing its stack (protobuf decoding) and the wake-up of
//     another thread to run it;
//   - the request run on the reading goroutine: 6.0µs;
//   - no timer on the hot path (the watchdog instead of a per-request
//     handoff timer and of per-write deadlines; AfterFunc instead of
//     per-call deadlines on the client): 5.5µs. Across processes, taking
//     the per-write deadline away cut the transport-only round trip from
//     14.5 to 12µs p50, and the handoff timer from 12 to 10.8µs (echo 7µs
//     in the same runs);
//   - no timer per request on the server either (the watchdog cancels
//     calls past their deadline): with a ctx deadline, 23 -> 11µs p50;
//   - polling before parking (DefaultSpinWait) took the cross-process
//     one-row ONNX MLP round trip from 44-48µs to 15µs p50 (the echo:
//     8µs), and 64 rows from 64-80µs to 21µs.
//
// Before polling, across processes, one caller, the transport alone (a no-op handler)
// took 12-20µs p50, the one-row ONNX MLP 30-42µs (the sidecar's Predict
// with the model is 5-8µs of it), gRPC 115-190µs; the echo's p99 was
// already 13 times its p50, the fast lane's about 4 times. The
// cross-process figures move with the machine's state, the echo's least:
// idle vCPUs wake slowly, and an 8µs ping-pong keeps them awake where a
// longer one lets them sleep (the transport alone then takes about 30µs).
// With 8 callers the two CPUs are the limit: the fast lane did 48-70k MLP
// calls/s against gRPC's 18-19k, the raw echo 190-265k round trips/s and
// the bare in-process model 300-320k calls/s; a fast-lane call costs the
// sidecar about 15µs of CPU, most of it the kernel's socket and scheduling
// work.
//
// A bidding script pauses between its calls to build its request (tens of
// microseconds in goja), long enough for the sidecar's reader to park, so
// the request paid the sidecar's wake-up. jsbridge now wakes the sidecar
// (Client.Wake: a wake frame on the connection the call will use) as each
// call of a module that infers starts, so that the wake-up overlaps the
// script's own work: js-string (bench/) went from 156-159 to 117-120µs p50
// at batch 1 and from 289-294 to 267-271µs at batch 64.
//
// Merging the requests of concurrent callers into one frame (natural
// batching: callers that find MaxInFlight frames out wait and leave
// together when one comes back) was built and measured, and not kept: with
// 8 callers it gave 27-38k calls/s against 34-38k without, on a machine
// where the 8-caller run kept the two processes at 0.74 and 0.39 CPUs:
// the limit there is wake-up latency, not the socket's CPU.
//
// A multiplexing client (one reader goroutine per connection, answers
// matched by id) was not built: its reader would hand every answer to the
// waiting caller, the same goroutine wake-up the server side measured as
// costly; checking out a connection lets the caller read its own answer,
// and concurrency comes from more connections (a file descriptor and a
// 16 KiB read buffer each, per side). The ids, cancel frames and
// concurrent calls per connection are in the protocol, and the server
// supports them, should a multiplexing client be measured to win.
package fastlane
