// Package examples holds inferbid's sample bidding module, sample request and
// sample model bucket; the bidding module is embedded so bidding-server runs
// the demo with no --udf_code_path.
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
