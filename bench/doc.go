// Package bench holds the peer comparison (issue 10, item 5): one request
// on one model, sent through each layer of inferbid and through a Node.js
// peer, in one run, so that the cost of each layer and the distance to the
// peer read as ratios. It has no code of its own; `make bench` runs
// BenchmarkPeerComparison, which prints the table on stdout, and the
// server-level comparison of whole servers, bidding-server against a
// Node.js HTTP bidder (the last section).
//
// The model is bench/testdata/pctr.onnx (scripts/gen-onnx-models.py): a
// small pCTR MLP with a FLOAT input dense [b,8], an INT64 input ad_id [b,1]
// (hashed and embedded) and a DOUBLE input bid_floor [b,1], giving pctr
// FLOAT [b,1]. The request is built by bench/peer/request.js, the one
// definition both the JS rows (in goja) and the Node.js peer load; the Go
// rows use the typed entries batch.Parse reads from that request's JSON.
//
// The rows, each at batch 1 and batch 64:
//
//	raw-echo   a round trip of as many bytes as the fast-lane request over a
//	           Unix socket, to a child process (this test binary re-executed
//	           as an echo server): the floor of any cross-process transport
//	runtime    runtimes.Model.Predict in this process (ONNX Runtime, one
//	           intra-op thread): the bare model call
//	fast-lane  sidecar.Client.Predict with the default transport to
//	           inference-sidecar-onnx in a child process (same thread
//	           settings)
//	grpc       the same with the gRPC transport
//	js-string  a JS function, called from Go through the jsbridge pool, that
//	           builds the request from strings as bidding code does, then
//	           JSON.stringify, runInference(string) (fast lane to the same
//	           sidecar), JSON.parse of the answer
//	js-object  the same with runInference(object), then JSON.parse
//	js-worker  the js-string call as bidding-server makes it: generateBid
//	           (jsWorker in the script: jsString of the interest group's
//	           rows) in a JS worker process through a jsworker.Host of one
//	           worker (this test binary re-executed: TestMain's worker
//	           mode), whose runInference goes over the worker's own fast
//	           lane to the same sidecar; a request of one interest group,
//	           the bid (the scores) back as JSON. The worker runs on
//	           jsworker's defaults (GOMAXPROCS 1; GOGC 400 and the soft
//	           memory limit of bidding-server's 1 GiB heap budget; it
//	           polls for its next chunk for 200 µs, the host parks)
//	js-inproc  the js-string row with runInference answered by the bare
//	           runtime in this process (no sidecar): the JS layer's own
//	           cost, for information
//	js-inproc-shared the js-inproc row on a pool with ShareRuntimes (warm
//	           runtimes serving call after call): the difference to
//	           js-inproc is what isolation costs a call
//	node-peer  bench/peer/onnx_peer.js in Node.js 20 with onnxruntime-node
//	           1.30.0, in-process: the same request built the same way,
//	           JSON.stringify and JSON.parse, typed arrays, session.run, the
//	           response rendered and parsed (the JSON work of the host and of
//	           the script, without the process boundary)
//
// This process's collector is set as bidding-server --js_in_process sets
// its own (GOGC 400, a soft memory limit of 1.25 GiB + 64 MiB), so that the
// in-process JS rows run as they would in the server.
//
// The Go rows are sub-benchmarks (b.Loop: -benchtime applies, and each
// also prints a benchmark line); the peer runs about as long, sized from a
// short probe run. Each row reports p50 and p99 latency (µs), calls/s and
// p99/p50; then come the ratios fast-lane/raw-echo and js-*/node-peer
// (p50), and the worker hop: js-worker minus js-string (p50), what running
// the call in a worker process adds. A concurrency section runs 8
// concurrent callers through the fast lane and 8 goroutines on the bare
// runtime (and, for information, the peer with 8 calls in flight) and
// gives the throughput ratio. Targets are printed next to each measured
// ratio and never asserted: fast lane ≤ 1.5x raw echo; JS ≤ 2.0x the peer
// at batch 1 and ≤ 1.2x at batch 64; p99 ≤ 4x p50; 8-caller fast-lane
// throughput ≥ 0.8x the bare runtime's; worker hop ≤ 25 µs.
//
// Before measuring, the harness checks that every path (sidecar on both
// transports, the JS rows, the worker, the Node.js peer) answers the bare
// runtime's scores for the request; TestPeerMatchesRuntime does the same
// for the peer alone. The peer needs /usr/bin/node (or $INFERBID_NODE) and
// onnxruntime-node in .cache/node-peer (`make deps-node-peer`); without
// them the test and the benchmark skip and say so, unless
// INFERBID_REQUIRE_PEER=1 (make bench), when they fail.
//
// BenchmarkTail (bench/tail_test.go, also in make bench) takes the JS
// path's tail apart: the js-worker call on defaults beside variants that
// each change one setting (the worker's GOMAXPROCS and collector, polling
// on its connection to the host at either end and on its fast lane to the
// sidecar) and the js-string
// call at GOGC 400 and 100, all in alternating rounds of one run, at batch
// 1 and 64; it prints p50, p99, p99/p50 and the ratios to the defaults
// (docs/architecture.md, "The JS path's tail").
//
// # The server-level peer comparison
//
// BenchmarkServerPeer (cmd/bidding-server/peer_bench_test.go, issue 25; in
// make bench with -benchtime 1x) compares whole servers: what an ad tech
// pays per bid. In one run, one server at a time, the same load generator
// sends the same POST /v1/generateBids request of 20 interest groups over 4
// keep-alive connections for INFERBID_SERVER_PEER_DURATION each (make
// bench's SERVER_PEER_DURATION; default 10s, after a 2 s warm-up) to
//
//	bidding-server, defaults  JS in worker processes, isolated calls, the
//	           ONNX sidecar (runtime config {"num_intraop_threads":1,
//	           "num_interop_threads":1}) holding bench/testdata/pctr.onnx as
//	           pctr/v1/; each generateBid builds its request with
//	           request.js, calls runInference once at batch 1 (string in,
//	           JSON.parse out) and bids value * pctr
//	bidding-server, --js_in_process  the same with the JS in the server
//	           process
//	Node.js    bench/peer/http_bidder.js: what a well-written Node.js 20
//	           bidder would be, the http module, async, onnxruntime-node
//	           in-process (one intra-op thread); per interest group, all at
//	           once (Promise.all), the request built by request.js, typed
//	           arrays of it, session.run at batch 1, value * pctr. It takes
//	           the same request and answers the same JSON, and 400 (413,
//	           404, 405) with an error naming what is wrong; TestHTTPBidder
//	           checks both (in make test)
//
// Every server's first answers are checked in full (20 bids, one pctr,
// bid = value * pctr; the Node.js bidder's pctr must be bidding-server's
// within 1e-6), and during the runs wrk's script (bench/peer/generatebids.lua)
// checks every answer: status 200, 20 bids, no error; one bad answer or
// socket error fails the benchmark. The table gives requests/s and bids/s,
// p50 and p99 (wrk's), and CPU µs per interest group from /proc/PID/stat
// (utime + stime, read before and after the timed run) for the host
// (bidding-server and its JS worker processes, found by ppid and
// executable; node) and for the sidecar separately, the machine's busy
// cores with the other load among them (the machine is shared: read the
// numbers next to it), and wrk's own CPU per request. Then the ratios
// inferbid/Node.js of throughput, p99 and CPU per interest group, with the
// issue's targets beside them (throughput ≥ 0.5x, p99 ≤ 3x, host ≤ 60 µs
// and sidecar ≤ 20 µs per interest group), printed, never asserted.
//
// The load generator is wrk (Debian's package, installed by make bench:
// scripts/apt-install.sh wrk) rather than a Go one from the module proxy:
// the numbers were taken with it, it is the usual tool for such
// comparisons, and it is cheap for a load generator on a 2-core machine it
// shares with the servers (an event loop in C, one thread here; its CPU
// per request, the script's per-answer checks included, is printed), while
// its latency percentiles come from its own histogram (--latency)
// and a Lua script carries the POST body and the checks. It is closed-loop
// (each connection sends its next request when the answer arrives), so
// the latencies are those of a server under as much load as it can take
// from 4 clients, not of a fixed arrival rate.
package bench
