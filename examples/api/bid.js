// The bidding module of README.md's "The generateBids HTTP API": a bid from
// the first ad's value and an auction signal, without inference; the group
// named "broken" reads an undefined variable (line 6), to show a script
// error's answer.
function generateBid(interestGroup, auctionSignals, perBuyerSignals, trustedBiddingSignals, browserSignals) {
  if (interestGroup.name === "broken") return undefinedVar;
  const ad = interestGroup.ads[0];
  return {render: ad.render_url, bid: ad.metadata.value * auctionSignals.multiplier};
}
