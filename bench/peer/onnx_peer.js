#!/usr/bin/env node
// onnx_peer.js: the Node.js peer of the peer comparison (bench/doc.go). It runs
// the comparison's request in-process through onnxruntime-node, doing per call
// what a bidding function and its server do around the model:
//
//   JSON in   the request built from strings (request.js, the same code the
//             JS rows run in goja), JSON.stringify as bidding code does, then
//             JSON.parse and typed arrays from the strings as the server does;
//   run       session.run;
//   JSON out  the response rendered (JSON.stringify), then JSON.parse as
//             bidding code reads runInference's answer.
//
// usage: node onnx_peer.js MODEL_FILE BATCH ITERATIONS CONCURRENCY
//
// It warms up, then times ITERATIONS calls, CONCURRENCY of them in flight at a
// time (onnxruntime-node runs each session.run on the main thread, so calls in
// flight queue rather than run in parallel), each with process.hrtime.bigint(),
// and prints one JSON object on stdout:
//
//   {"p50_us":..,"p99_us":..,"calls_per_s":..,"calls":..,"batch":..,
//    "concurrency":..,"node":"v20..","onnxruntime":"1.30.0","scores":[..]}
//
// p50/p99 are nearest-rank percentiles; calls_per_s is calls over the wall time
// of the timed part; scores are the last call's answer (the Go harness checks
// them against ONNX Runtime in Go). Errors go to stderr with exit status 1.
//
// onnxruntime-node@1.30.0 must be on the module path: `make deps-node-peer`
// installs it into .cache/node-peer/, and the harness sets NODE_PATH to
// .cache/node-peer/node_modules.
"use strict";

const path = require("path");
const { benchFeatures, buildRequest, readScores } = require(path.join(__dirname, "request.js"));

function fail(msg) {
  process.stderr.write("onnx_peer.js: " + msg + "\n");
  process.exit(1);
}

let ort;
try {
  ort = require("onnxruntime-node");
} catch (e) {
  fail("cannot load onnxruntime-node (`make deps-node-peer` installs it into .cache/node-peer; " +
    "point NODE_PATH at .cache/node-peer/node_modules): " + e.message);
}

// The model path the request names (the peer has one model; it is carried
// through to the response as a server would).
const MODEL_PATH = "pctr/v1/";

// Request data_type -> [ort.Tensor type, typed array, conversion of one string].
const INPUT_TYPES = {
  FLOAT: ["float32", Float32Array, Number],
  DOUBLE: ["float64", Float64Array, Number],
  INT64: ["int64", BigInt64Array, BigInt],
};
// ort.Tensor type -> response data_type.
const OUTPUT_TYPES = { float32: "FLOAT", float64: "DOUBLE", int64: "INT64" };

function positiveInt(s, what) {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 1) {
    fail(what + " must be a positive integer, got " + JSON.stringify(s));
  }
  return n;
}

function percentile(sorted, q) {
  const i = Math.ceil(q * sorted.length) - 1;
  return sorted[Math.min(Math.max(i, 0), sorted.length - 1)];
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length !== 4) {
    fail("usage: node onnx_peer.js MODEL_FILE BATCH ITERATIONS CONCURRENCY");
  }
  const modelFile = args[0];
  const rows = positiveInt(args[1], "BATCH");
  const iterations = positiveInt(args[2], "ITERATIONS");
  const concurrency = positiveInt(args[3], "CONCURRENCY");

  // The same settings as the Go side: one intra-op thread, sequential executor.
  const session = await ort.InferenceSession.create(modelFile, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  const features = benchFeatures(rows);

  async function call() {
    // JSON in.
    const req = JSON.parse(JSON.stringify(buildRequest(MODEL_PATH, features)));
    const entry = req.request[0];
    const feeds = {};
    for (const t of entry.tensors) {
      const type = INPUT_TYPES[t.data_type];
      if (!type) {
        throw new Error("unsupported data_type " + t.data_type);
      }
      feeds[t.tensor_name] = new ort.Tensor(type[0], type[1].from(t.tensor_content, type[2]), t.tensor_shape);
    }
    // Run.
    const out = await session.run(feeds);
    // JSON out.
    const tensors = session.outputNames.map((name) => ({
      tensor_name: name,
      tensor_shape: out[name].dims,
      data_type: OUTPUT_TYPES[out[name].type],
      tensor_content: Array.from(out[name].data),
    }));
    const resp = JSON.parse(JSON.stringify({ response: [{ model_path: entry.model_path, tensors: tensors }] }));
    return readScores(resp, rows);
  }

  const warmUp = Math.min(1000, Math.max(50, Math.floor(iterations / 10)));
  for (let i = 0; i < warmUp; i++) {
    await call();
  }

  const lat = new Array(iterations);
  let next = 0;
  let scores;
  async function worker() {
    for (;;) {
      const i = next++;
      if (i >= iterations) {
        return;
      }
      const start = process.hrtime.bigint();
      scores = await call();
      lat[i] = Number(process.hrtime.bigint() - start);
    }
  }
  const wallStart = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const wall = Number(process.hrtime.bigint() - wallStart);

  lat.sort((a, b) => a - b);
  process.stdout.write(JSON.stringify({
    p50_us: percentile(lat, 0.5) / 1e3,
    p99_us: percentile(lat, 0.99) / 1e3,
    calls_per_s: iterations / (wall / 1e9),
    calls: iterations,
    batch: rows,
    concurrency: concurrency,
    node: process.version,
    onnxruntime: ort.env.versions.node,
    scores: scores,
  }) + "\n");
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
