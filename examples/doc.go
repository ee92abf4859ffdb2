// Package examples holds inferbid's sample bidding module, sample request and
// sample model bucket; the bidding module is embedded so bidding-server runs
// the demo with no --udf_code_path.
package examples
