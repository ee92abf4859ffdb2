// Package httpjson writes JSON answers for the HTTP servers of the module
// (bidding-server's /v1 API, the KServe v2 and TF Serving REST endpoints in
// kserve): one place that sets the content type, writes the status and
// encodes the body without HTML escaping, and one shape of error object,
// {"error": message}, which both KServe v2 and the bidding server's API use.
//
// It is a few lines over encoding/json rather than a library: the servers
// need nothing a router or response framework would add.
package httpjson
