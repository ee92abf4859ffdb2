#!/usr/bin/env node
// http_bidder.js: the Node.js HTTP bidder of the server-level peer comparison
// (BenchmarkServerPeer in cmd/bidding-server, bench/doc.go). It is what a
// well-written Node.js bidder would be: Node's `http` module, async, with
// onnxruntime-node in-process, serving bidding-server's endpoint with the same
// request and response:
//
//   POST /v1/generateBids
//   {"interest_groups":[{"name":"ig0","value":1},...],"auction_signals":{..},..}
//   -> 200 {"bids":[{"interest_group":"ig0","bid":{"render":"ig0","pctr":..,"bid":..}}
//                   or {"interest_group":"ig0","error":"..."}, ...]}
//   -> 400/404/405/413 {"error":"what is wrong"}
//
// For each interest group (all of them at once: Promise.all) it does what the
// benchmark's generateBid does in bidding-server: builds the model's request
// for one ad from strings with bench/peer/request.js (benchFeatures,
// buildRequest: the same JS both sides run), makes typed arrays of it, runs
// bench/testdata/pctr.onnx at batch 1 (session.run; one intra-op thread) and
// bids value * pctr. There is no JSON round trip of the model's request here:
// in-process, a Node.js bidder hands tensors to the session directly.
//
// usage: node http_bidder.js MODEL_FILE [PORT]
//
// It listens on 127.0.0.1:PORT (default 0: a free port) and then prints one
// JSON line on stdout: {"listening":"127.0.0.1:PORT","node":"v20..","onnxruntime":"1.30.0"}.
// SIGTERM or SIGINT closes it. Errors at start go to stderr with exit status 1.
//
// onnxruntime-node@1.30.0 must be on the module path: `make deps-node-peer`
// installs it into .cache/node-peer/; set NODE_PATH to .cache/node-peer/node_modules.
"use strict";

const http = require("http");
const path = require("path");
const { benchFeatures, buildRequest } = require(path.join(__dirname, "request.js"));

function fail(msg) {
  process.stderr.write("http_bidder.js: " + msg + "\n");
  process.exit(1);
}

let ort;
try {
  ort = require("onnxruntime-node");
} catch (e) {
  fail("cannot load onnxruntime-node (`make deps-node-peer` installs it into .cache/node-peer; " +
    "point NODE_PATH at .cache/node-peer/node_modules): " + e.message);
}

// The model path the request names, as in bidding-server's benchmark module.
const MODEL_PATH = "pctr/v1/";
// bidding-server's defaults: --max_request_bytes, --max_interest_groups.
const MAX_BODY_BYTES = 4 << 20;
const MAX_GROUPS = 1000;

// Request data_type -> [ort.Tensor type, typed array, conversion of one string].
const INPUT_TYPES = {
  FLOAT: ["float32", Float32Array, Number],
  DOUBLE: ["float64", Float64Array, Number],
  INT64: ["int64", BigInt64Array, BigInt],
};

// The features of one ad, computed once (as the bidding module does).
const FEATURES = benchFeatures(1);

// HTTPError is an answer other than 200, with its message.
class HTTPError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// parseRequest checks a generateBids body and returns its interest groups.
function parseRequest(body) {
  let req;
  try {
    req = JSON.parse(body);
  } catch (e) {
    throw new HTTPError(400, "request body is not a generateBids JSON object: " + e.message);
  }
  if (req === null || typeof req !== "object" || Array.isArray(req)) {
    throw new HTTPError(400, "request body is not a generateBids JSON object");
  }
  const groups = req.interest_groups;
  if (!Array.isArray(groups) || groups.length === 0) {
    throw new HTTPError(400, 'request has no "interest_groups" (an array of interest group objects with a "name")');
  }
  if (groups.length > MAX_GROUPS) {
    throw new HTTPError(400, "request has " + groups.length + " interest groups, the limit is " + MAX_GROUPS);
  }
  groups.forEach((ig, i) => {
    if (ig === null || typeof ig !== "object" || Array.isArray(ig)) {
      throw new HTTPError(400, "interest_groups[" + i + "] is not an object");
    }
    if (typeof ig.name !== "string") {
      throw new HTTPError(400, "interest_groups[" + i + '] has no string "name"');
    }
    if (typeof ig.value !== "number" || !Number.isFinite(ig.value)) {
      throw new HTTPError(400, "interest_groups[" + i + '] has no numeric "value"');
    }
  });
  return groups;
}

// readBody collects the request body, at most MAX_BODY_BYTES.
function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    const onData = (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        // The answer says so and closes the connection; the rest is not read.
        req.off("data", onData);
        req.pause();
        reject(new HTTPError(413, "request body is larger than " + MAX_BODY_BYTES + " bytes"));
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function send(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(body);
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length < 1 || args.length > 2) {
    fail("usage: node http_bidder.js MODEL_FILE [PORT]");
  }
  const port = args.length > 1 ? Number(args[1]) : 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    fail("PORT must be an integer in [0, 65535], got " + JSON.stringify(args[1]));
  }

  // The same settings as the sidecar's: one intra-op thread, sequential executor.
  const session = await ort.InferenceSession.create(args[0], {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  if (session.outputNames.length !== 1) {
    fail(args[0] + ": the model has outputs " + JSON.stringify(session.outputNames) + ", want one (pctr)");
  }
  const output = session.outputNames[0];

  // generateBid: one ad's request built from strings, the model at batch 1,
  // value * pctr.
  async function generateBid(ig) {
    const feeds = {};
    for (const t of buildRequest(MODEL_PATH, FEATURES).request[0].tensors) {
      const [type, Typed, conv] = INPUT_TYPES[t.data_type];
      feeds[t.tensor_name] = new ort.Tensor(type, Typed.from(t.tensor_content, conv), t.tensor_shape);
    }
    const out = await session.run(feeds);
    const pctr = Number(out[output].data[0]);
    return { render: ig.name, pctr: pctr, bid: ig.value * pctr };
  }

  async function generateBids(req, res) {
    if (req.url !== "/v1/generateBids") {
      throw new HTTPError(404, "no such endpoint " + JSON.stringify(req.url) + " (POST /v1/generateBids)");
    }
    if (req.method !== "POST") {
      res.setHeader("Allow", "POST");
      throw new HTTPError(405, "method " + req.method + " not allowed (POST /v1/generateBids)");
    }
    const groups = parseRequest(await readBody(req));
    const bids = await Promise.all(groups.map((ig) => generateBid(ig).then(
      (bid) => ({ interest_group: ig.name, bid: bid }),
      (err) => ({ interest_group: ig.name, error: "generateBid failed: " + (err && err.message ? err.message : String(err)) }))));
    send(res, 200, { bids: bids });
  }

  const server = http.createServer((req, res) => {
    generateBids(req, res).catch((err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof HTTPError) {
        if (err.status === 413) {
          res.setHeader("Connection", "close");
        }
        send(res, err.status, { error: err.message });
        return;
      }
      send(res, 500, { error: "internal error: " + (err && err.message ? err.message : String(err)) });
    });
  });
  server.on("clientError", (err, socket) => {
    if (socket.writable) {
      socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    }
  });
  const stop = () => {
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref(); // connections in flight
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  const addr = server.address();
  process.stdout.write(JSON.stringify({
    listening: addr.address + ":" + addr.port,
    node: process.version,
    onnxruntime: ort.env.versions.node,
  }) + "\n");
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
