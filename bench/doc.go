// Package bench holds the peer comparison (issue 10, item 5): one request
// on one model, sent through each layer of inferbid and through a Node.js
// peer, in one run, so that the cost of each layer and the distance to the
// peer read as ratios. It has no code of its own; `make bench` runs
// BenchmarkPeerComparison, which prints the table on stdout.
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
package bench
