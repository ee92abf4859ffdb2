// bid-v1.js: version 1 of an ad tech's bidding module for examples/code/upload.sh.
// It bids a constant per interest group; a real module calls runInference.
function generateBid(interestGroup, auctionSignals, perBuyerSignals, trustedBiddingSignals, browserSignals) {
  return {render: "https://ads.example/" + interestGroup.name, bid: 1.0, ad: {version: "v1"}};
}
