// Package codestore delivers the ad tech's bidding code to bidding-server
// as B&A's bidding service fetches buyer code (buyer_code_fetch_config):
// from a local file (LOCAL: bidding-server reads it once at start, as
// --udf_code_path), from a bucket where every blob is a code version
// (BUCKET), or from a URL fetched every period (URL); a Store polls the
// last two.
//
// ParseFetchConfig reads the config with B&A's field names (fetchMode,
// biddingJsPath, protectedAuctionBiddingJsBucket,
// protectedAuctionBiddingJsBucketDefaultBlob, biddingJsUrl,
// biddingWasmHelperUrl, urlFetchPeriodMs, urlFetchTimeoutMs; snake_case
// too); unknown fields and contradictions are errors naming the field.
// B&A's fields for what inferbid does not do (protected app signals, ads
// retrieval, executables, debug URLs) are accepted at their zero value, so
// that a B&A config can be used as it is, and refused otherwise.
//
// # Versions
//
// In BUCKET mode each blob is a version named by its key; a blob "x.wasm"
// beside "x.js" is x.js's Wasm helper (inferbid's convention: B&A does not
// support helpers in bucket mode yet), counted in its size and SHA-256 and
// handed to that version's generateBid calls as browserSignals.wasmHelper
// (a WebAssembly.Module), in place of --udf_wasm_helper_path. A request
// names a version (code_version); without one it runs
// protectedAuctionBiddingJsBucketDefaultBlob. In URL mode the one version is
// named by biddingJsUrl.
//
// # Syncing
//
// A Store polls its source every period (urlFetchPeriodMs, for buckets
// too). The bucket is the model store's (modelstore.Bucket: the same
// gocloud opener, file:// reads confined to the bucket directory, listed
// versions: S3 ETag, GCS generation, MD5, size and modification time), so
// only blobs whose listing changed are read again (a file:// bucket's blobs
// are read on every poll: fileblob's modification time is too coarse to
// trust, and a local read is cheap); a URL is fetched with
// If-None-Match/If-Modified-Since, so an unchanged one costs a 304. A
// version (module and helper) larger than Options.MaxBytes (16 MiB) is
// refused before it is read.
//
// Changed versions are validated by Options.Validate — jsworker.Validate,
// which compiles each, runs its top level and checks generateBid in a
// fresh worker process: untrusted top-level code never runs in the server.
// The new set (unchanged versions, changed ones that load, the previous
// content of changed ones that do not, minus deleted blobs) is swapped into
// the Loader (jsworker.Host.SetModules: new workers, then an atomic swap;
// requests already running finish on the old code). Nothing changes when
// the source cannot be read or the default is missing or has never loaded.
// A content that failed is remembered by its SHA-256: it is neither
// validated nor logged again until the blob changes, so a failure is logged
// once per content, not once per poll. Status shows every version (state
// default, serving or failed, SHA-256, size, loaded_at, the last error with
// a syntax error's line and column). Metrics: inferbid_code_versions_loaded,
// inferbid_code_fetch_failures_total, inferbid_code_load_failures_total,
// inferbid_code_swaps_total.
//
// Why not modelstore's Watcher itself: it syncs a config object that lists
// models with checksums and grace periods, and registers files in the
// sidecar; here every blob is a version and the target is the JS workers.
// What both need of a bucket is shared (modelstore.Bucket); the sync rules,
// a page of code, are not. The back-off of modelstore is not needed here:
// a content that fails is not retried at all until it changes (JS loading
// is deterministic), and a source that cannot be read is polled at the
// period, logged once per distinct error.
package codestore
