// Sample bidding module for inferbid's bidding-server (and B&A-style hosts).
//
// generateBid picks the latest pCTR and pCVR models from getModelPaths()
// (paths like "pctr/v2/": the highest vN under each family), builds ONE batch
// per interest group with an entry per model (a row per ad), runs it with
// runInference, and bids on the ad with the highest value * pctr * pcvr.
//
// Inputs (the sample models of examples/bucket, see tfsave.PCTRModel and
// tfsave.PCVRModel):
//   pctr: ad_id INT64 [n,1] (<100), publisher_id INT64 [n,1] (<50), dense FLOAT [n,6]
//   pcvr: campaign_id INT64 [n,1] (<64), country_id INT64 [n,1] (<32), features DOUBLE [n,5]
// Ads: interestGroup.ads = [{render_url, metadata: {ad_id, campaign_id, value}}].
// User features: interestGroup.user_bidding_signals.dense (6 numbers) and
// perBuyerSignals.features (5 numbers); publisher and country come from
// browserSignals.publisher_id / country_id.
//
// The batch is passed as a JSON string, the B&A contract. inferbid also
// accepts the object itself (runInference(batch)), which skips
// JSON.stringify and the host's JSON parse.

function latestModel(paths, family) {
  var best = null, bestVersion = -1;
  for (var i = 0; i < paths.length; i++) {
    var m = /^([^\/]+)\/v(\d+)\/$/.exec(paths[i]);
    if (m && m[1] === family && Number(m[2]) > bestVersion) {
      best = paths[i];
      bestVersion = Number(m[2]);
    }
  }
  return best;
}

function fixedLength(values, n) {
  var out = [];
  for (var i = 0; i < n; i++) {
    var v = values && typeof values[i] === "number" ? values[i] : 0;
    out.push(v);
  }
  return out;
}

function mod(x, n) {
  x = Math.floor(Number(x) || 0);
  return ((x % n) + n) % n;
}

function tensor(name, type, shape, content) {
  return {tensor_name: name, data_type: type, tensor_shape: shape, tensor_content: content};
}

// buildBatch makes the one batch of an interest group: a pCTR entry and a
// pCVR entry, each with one row per ad.
function buildBatch(pctrPath, pcvrPath, ads, userDense, buyerFeatures, browserSignals) {
  var n = ads.length;
  var adIds = [], publishers = [], dense = [], campaigns = [], countries = [], features = [];
  var publisher = mod(browserSignals && browserSignals.publisher_id, 50);
  var country = mod(browserSignals && browserSignals.country_id, 32);
  for (var i = 0; i < n; i++) {
    var md = ads[i].metadata || {};
    adIds.push(mod(md.ad_id, 100));
    publishers.push(publisher);
    dense.push.apply(dense, userDense);
    campaigns.push(mod(md.campaign_id, 64));
    countries.push(country);
    features.push.apply(features, buyerFeatures);
  }
  return {request: [
    {model_path: pctrPath, tensors: [
      tensor("ad_id", "INT64", [n, 1], adIds),
      tensor("publisher_id", "INT64", [n, 1], publishers),
      tensor("dense", "FLOAT", [n, 6], dense)]},
    {model_path: pcvrPath, tensors: [
      tensor("campaign_id", "INT64", [n, 1], campaigns),
      tensor("country_id", "INT64", [n, 1], countries),
      tensor("features", "DOUBLE", [n, 5], features)]}
  ]};
}

function generateBid(interestGroup, auctionSignals, perBuyerSignals, trustedBiddingSignals, browserSignals) {
  var ads = (interestGroup && interestGroup.ads) || [];
  if (ads.length === 0) {
    return {bid: 0, reason: "interest group has no ads"};
  }
  if (typeof getModelPaths !== "function") {
    throw new Error("inference is disabled on this server (no sidecar)");
  }
  var paths = JSON.parse(getModelPaths());
  var pctrPath = latestModel(paths, "pctr"), pcvrPath = latestModel(paths, "pcvr");
  if (!pctrPath || !pcvrPath) {
    throw new Error("no pctr/vN/ and pcvr/vN/ models registered (have: " + paths.join(", ") + ")");
  }
  var userDense = fixedLength(interestGroup.user_bidding_signals && interestGroup.user_bidding_signals.dense, 6);
  var buyerFeatures = fixedLength(perBuyerSignals && perBuyerSignals.features, 5);
  var batch = buildBatch(pctrPath, pcvrPath, ads, userDense, buyerFeatures, browserSignals);
  var response = JSON.parse(runInference(JSON.stringify(batch))).response;

  for (var r = 0; r < response.length; r++) {
    if (response[r].error) {
      throw new Error("inference failed: " + response[r].error.error_type + ": " + response[r].error.description);
    }
  }
  var pctr = response[0].tensors[0].tensor_content;
  var pcvr = response[1].tensors[0].tensor_content;
  var best = null;
  for (var i = 0; i < ads.length; i++) {
    var value = Number((ads[i].metadata || {}).value) || 0;
    var bid = value * pctr[i] * pcvr[i];
    if (best === null || bid > best.bid) {
      best = {render: ads[i].render_url, bid: bid, pctr: pctr[i], pcvr: pcvr[i], value: value};
    }
  }
  best.model_paths = [pctrPath, pcvrPath];
  console.log("bid", interestGroup.name, best.render, best.bid.toFixed(6));
  return best;
}
