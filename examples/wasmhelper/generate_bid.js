// generate_bid.js: a bidding module that hashes the interest group's
// features into a vector (signed feature hashing) and scores it with a
// linear model. The hashing runs in the Wasm helper that bidding-server hands
// every call as browserSignals.wasmHelper (--udf_wasm_helper_path
// examples/wasmhelper/feature_hash.wasm), a WebAssembly.Module; without a
// helper it runs the same hashing in JS. Both give the same vector.

const BUCKETS = 64;

// hashFeaturesJS is feature_hash.wat's hash_features in JS: each feature's
// 32-bit FNV-1a hash h (over its UTF-16 code units' low bytes, which are
// the UTF-8 bytes for ASCII) adds (h & 1 ? -1 : +1) to bucket (h >>> 1) %
// buckets.
function hashFeaturesJS(features, buckets) {
  const out = new Float32Array(buckets);
  for (const f of features) {
    let h = 0x811c9dc5;
    for (let i = 0; i < f.length; i++) h = Math.imul(h ^ (f.charCodeAt(i) & 0xff), 0x01000193);
    h >>>= 0;
    out[(h >>> 1) % buckets] += (h & 1) ? -1 : 1;
  }
  return out;
}

// hashFeaturesWasm does it in the helper: the features go into its memory
// as bytes separated by 0, the vector comes back as a view of its memory.
function hashFeaturesWasm(exports, features, buckets) {
  let n = 0;
  for (const f of features) n += f.length + 1;
  const out = (n + 7) & ~7;
  const need = out + 4 * buckets;
  if (need > exports.memory.buffer.byteLength) {
    exports.memory.grow(Math.ceil((need - exports.memory.buffer.byteLength) / 65536));
  }
  const mem = new Uint8Array(exports.memory.buffer); // after any grow: a grow detaches the old buffer
  let p = 0;
  for (const f of features) {
    for (let i = 0; i < f.length; i++) mem[p++] = f.charCodeAt(i) & 0xff;
    mem[p++] = 0;
  }
  exports.hash_features(0, p, out, buckets);
  return new Float32Array(exports.memory.buffer, out, buckets);
}

// features are what the interest group says about the user.
function features(interestGroup) {
  const s = interestGroup.userBiddingSignals || interestGroup.user_bidding_signals || {};
  return (s.features || []).concat(interestGroup.name ? ['ig=' + interestGroup.name] : []);
}

function generateBid(interestGroup, auctionSignals, perBuyerSignals, trustedBiddingSignals, browserSignals) {
  const f = features(interestGroup);
  let vector;
  let by = 'js';
  // (WebAssembly is only read when there is a helper: a runtime makes its
  // WebAssembly namespace the first time a script reads it.)
  if (browserSignals && browserSignals.wasmHelper && browserSignals.wasmHelper instanceof WebAssembly.Module) {
    // A new instance per call: instances live for the call that made them.
    const helper = new WebAssembly.Instance(browserSignals.wasmHelper);
    vector = hashFeaturesWasm(helper.exports, f, BUCKETS);
    by = 'wasm';
  } else {
    vector = hashFeaturesJS(f, BUCKETS);
  }
  const weights = (perBuyerSignals && perBuyerSignals.weights) || [0.5, -0.25, 0.125];
  let score = 0;
  for (let i = 0; i < BUCKETS; i++) score += vector[i] * weights[i % weights.length];
  const ad = (interestGroup.ads || [])[0] || {};
  return { ad: { hashedBy: by }, bid: Math.max(0, 1 + score), render: ad.renderUrl || ad.render_url || '' };
}
