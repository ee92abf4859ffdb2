// request.js: the request of the peer comparison (bench/doc.go), built the way
// bidding code builds a runInference batch. Both sides load this one file: the
// Go harness runs it in the jsbridge pool (goja) and onnx_peer.js requires it in
// Node.js, so the JS rows and the Node.js peer do the same work per call.
//
// Plain ES5 functions (goja and Node.js both run it); exported only where
// `module` exists (Node.js).

// benchFeatures returns the features of `rows` ad candidates, as bidding code
// holds them (numbers from signals and the interest group): dense[r][i] =
// ((r*8+i) % 10) / 10, ad_id[r] = 1000003 + 7919*r, bid_floor[r] = 0.25 + 0.01*r.
// They are computed once; the request is built from them on every call.
function benchFeatures(rows) {
  var dense = [], adIds = [], floors = [];
  for (var r = 0; r < rows; r++) {
    for (var i = 0; i < 8; i++) {
      dense.push(((r * 8 + i) % 10) / 10);
    }
    adIds.push(1000003 + 7919 * r);
    floors.push(0.25 + 0.01 * r);
  }
  return { rows: rows, dense: dense, adIds: adIds, floors: floors };
}

// buildRequest builds the batch request for bench/testdata/pctr.onnx, with
// tensor_content as strings, as B&A's examples and bidding code send them.
function buildRequest(modelPath, f) {
  return {
    request: [{
      model_path: modelPath,
      tensors: [
        { tensor_name: "dense", data_type: "FLOAT", tensor_shape: [f.rows, 8], tensor_content: f.dense.map(String) },
        { tensor_name: "ad_id", data_type: "INT64", tensor_shape: [f.rows, 1], tensor_content: f.adIds.map(String) },
        { tensor_name: "bid_floor", data_type: "DOUBLE", tensor_shape: [f.rows, 1], tensor_content: f.floors.map(String) }
      ]
    }]
  };
}

// readScores returns the pctr scores of a parsed response (one per row); it
// throws on an error entry or an answer of the wrong size.
function readScores(resp, rows) {
  var entry = resp.response[0];
  if (entry.error) {
    throw new Error(entry.error.error_type + ": " + entry.error.description);
  }
  var scores = entry.tensors[0].tensor_content;
  if (scores.length !== rows) {
    throw new Error("expected " + rows + " scores, got " + scores.length);
  }
  return scores;
}

if (typeof module !== "undefined") {
  module.exports = { benchFeatures: benchFeatures, buildRequest: buildRequest, readScores: readScores };
}
