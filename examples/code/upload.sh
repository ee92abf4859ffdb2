#!/usr/bin/env bash
# upload.sh: an ad tech's code upload flow against a code bucket (README.md,
# "Bidding code from a bucket"). Starts bin/bidding-server (or
# $BIDDING_SERVER) with a file:// code bucket polled every 500 ms, then:
# serves bid.js (v1); uploads v2 as bid.js and keeps v1 as bid-v1.js; pins
# a request to bid-v1.js; uploads a broken bid.js (v2 keeps serving, GET
# /v1/code shows the error with its line and column); deletes bid-v1.js.
# No sidecar: the modules bid without inference. make demo builds the binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
server=${BIDDING_SERVER:-bin/bidding-server}
[ -x "$server" ] || { echo "$server is missing: run make demo first (it builds it)" >&2; exit 1; }
dir=$(mktemp -d)
bucket="$dir/code"
mkdir "$bucket"
# An upload: write beside, then rename, so that a poll never reads half a
# file (an object store's PUT is atomic by itself: gsutil cp, aws s3 cp).
upload() { cp "$1" "$bucket/.$2.tmp" && mv "$bucket/.$2.tmp" "$bucket/$2"; }
upload examples/code/bid-v1.js bid.js

config='{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file://'"$bucket"'","protectedAuctionBiddingJsBucketDefaultBlob":"bid.js","urlFetchPeriodMs":500}'
BUYER_CODE_FETCH_CONFIG=$config "$server" --listen 127.0.0.1:0 --drain_period 0 --js_workers 2 2>"$dir/log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
url=
for _ in $(seq 1 300); do
  addr=$(sed -n 's/.*bidding-server listening.* addr=\([^ ]*\).*/\1/p' "$dir/log" | head -1)
  [ -n "$addr" ] && url="http://$addr" && curl -sf "$url/readyz" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { echo "bidding-server exited:" >&2; cat "$dir/log" >&2; exit 1; }
  sleep 0.1
done
curl -sf "$url/readyz" >/dev/null || { echo "bidding-server not ready within 30 s" >&2; cat "$dir/log" >&2; exit 1; }

# bid [VERSION]: one interest group; prints the bid's version and value, or the error.
bid() {
  local body='{"interest_groups":[{"name":"shoes"}]'
  [ -n "${1:-}" ] && body+=',"code_version":"'"$1"'"'
  curl -s -X POST "$url/v1/generateBids" -d "$body}" |
    jq -c 'if .bids then .bids[0] | (.bid // .error) | {version: .ad.version, bid} else . end'
}
poll() { sleep 1.2; }   # two poll periods and a swap

echo "== bid.js v1 serves"
bid
echo "== upload v2 as bid.js, keep v1 as bid-v1.js"
upload examples/code/bid-v1.js bid-v1.js
upload examples/code/bid-v2.js bid.js
poll
bid
echo "== a request pinned to bid-v1.js"
bid bid-v1.js
echo "== upload a broken bid.js: v2 keeps serving"
upload examples/code/bid-broken.js bid.js
poll
bid
echo "== GET /v1/code"
curl -s "$url/v1/code" | jq -c '.versions[] | {name, state, size, last_error}'
echo "== delete bid-v1.js: it is no longer offered"
rm "$bucket/bid-v1.js"
poll
bid bid-v1.js
