// bid-v2.js: version 2, which bids more for interest groups with a longer name.
function generateBid(interestGroup, auctionSignals, perBuyerSignals, trustedBiddingSignals, browserSignals) {
  return {render: "https://ads.example/" + interestGroup.name, bid: 0.5 * interestGroup.name.length, ad: {version: "v2"}};
}
