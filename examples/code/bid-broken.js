// bid-broken.js: an upload with a syntax error (line 4), which never serves.
function generateBid(interestGroup) {
  var bid = 2 *
  return {render: "https://ads.example/" + interestGroup.name, bid: bid};
}}
