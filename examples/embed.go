package examples

import _ "embed"

// GenerateBidJS is bidding/generate_bid.js: the default bidding module of
// bidding-server.
//
//go:embed bidding/generate_bid.js
var GenerateBidJS string

// SampleRequest is bidding/request.json: a generateBids body for the demo.
//
//go:embed bidding/request.json
var SampleRequest []byte
