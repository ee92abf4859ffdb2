// tfjs_oracle.js: runs a model on TensorFlow.js (the TensorFlow team's own
// JavaScript implementation, CPU backend) and prints its outputs, for the
// TensorFlow runtime's oracle tests (runtimes/tensorflow/oracle_test.go).
//
// Usage: node tfjs_oracle.js <request.json>, with NODE_PATH naming the
// node_modules of scripts/install-tfjs.sh (.cache/tfjs/node_modules).
// The request is one of
//
//   {"mode": "graph", "model": "<dir>", "inputs": {...}, "outputs": ["node:0", ...]}
//     loads <dir>/model.json (a tfjs graph model: modelTopology is a frozen
//     GraphDef in protobuf's JSON form, Const values in weightsManifest and
//     the shards it names) with tfjs-converter and runs executeAsync;
//   {"mode": "layers", "layers": [{"fn": "lstm", "config": {...}, "weights": [...]}, ...],
//    "inputs": {"x": tensor}}
//     builds a tf.sequential of tfjs-layers layers (Keras semantics), sets
//     each layer's weights and runs predict on the one input.
//
// A tensor is {"dtype": "float32"|"int32"|"bool", "shape": [...], "data": [...]}
// with data flat in row-major order; non-finite floats are the strings
// "NaN", "Infinity", "-Infinity". The answer, on stdout, is
// {"outputs": [tensor, ...]} in the order asked for; an error is a non-zero
// exit with the message on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');
const tfconv = require('@tensorflow/tfjs-converter');

function decodeNumber(v) {
  if (typeof v === 'string') {
    return Number(v); // "NaN", "Infinity", "-Infinity"
  }
  return v;
}

function toTensor(spec) {
  const data = spec.dtype === 'bool' ? spec.data.map(Boolean) : spec.data.map(decodeNumber);
  return tf.tensor(data, spec.shape, spec.dtype);
}

function encodeNumber(v) {
  if (typeof v === 'boolean') {
    return v;
  }
  if (Number.isFinite(v)) {
    return v;
  }
  return String(v); // NaN, Infinity, -Infinity
}

async function fromTensor(t) {
  const data = await t.data();
  return {dtype: t.dtype, shape: t.shape, data: Array.from(data, encodeNumber)};
}

function loadGraph(dir) {
  const modelJSON = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
  const shards = [];
  for (const group of modelJSON.weightsManifest) {
    for (const p of group.paths) {
      shards.push(fs.readFileSync(path.join(dir, p)));
    }
  }
  const all = Buffer.concat(shards);
  const weights = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  return tfconv.loadGraphModelSync([modelJSON, weights]);
}

async function runGraph(req) {
  const model = loadGraph(req.model);
  const inputs = {};
  for (const [name, spec] of Object.entries(req.inputs || {})) {
    inputs[name] = toTensor(spec);
  }
  let outs = await model.executeAsync(inputs, req.outputs);
  if (!Array.isArray(outs)) {
    outs = [outs];
  }
  return Promise.all(outs.map(fromTensor));
}

async function runLayers(req) {
  const tfl = require('@tensorflow/tfjs-layers');
  const model = tfl.sequential();
  const layers = req.layers.map((spec) => {
    const make = tfl.layers[spec.fn];
    if (typeof make !== 'function') {
      throw new Error(`tfjs-layers has no layer function ${spec.fn}`);
    }
    const layer = make(spec.config);
    model.add(layer);
    return layer;
  });
  req.layers.forEach((spec, i) => {
    if (spec.weights && spec.weights.length > 0) {
      layers[i].setWeights(spec.weights.map(toTensor));
    }
  });
  const x = toTensor(req.inputs.x);
  return [await fromTensor(model.predict(x))];
}

async function main() {
  if (process.argv.length !== 3) {
    throw new Error('usage: node tfjs_oracle.js <request.json>');
  }
  await tf.setBackend('cpu');
  const req = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  let outputs;
  switch (req.mode) {
    case 'graph':
      outputs = await runGraph(req);
      break;
    case 'layers':
      outputs = await runLayers(req);
      break;
    default:
      throw new Error(`unknown mode ${JSON.stringify(req.mode)} (want "graph" or "layers")`);
  }
  process.stdout.write(JSON.stringify({outputs}));
}

main().catch((err) => {
  process.stderr.write(`tfjs_oracle.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
