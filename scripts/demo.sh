#!/usr/bin/env bash
# demo.sh: the README's main command. Builds bidding-server and the
# TensorFlow sidecar into bin/, starts bidding-server on the embedded example
# module (examples/bidding/generate_bid.js) with the sample bucket
# examples/bucket as a file:// bucket, waits until it is ready (sidecar
# healthy, first model sync done), lists the models, POSTs
# examples/bidding/request.json to /v1/generateBids, prints the bids and
# stops the server with SIGTERM.
#
#   scripts/demo.sh            (or: make demo)
#   DEMO_KEEP_LOG=1 scripts/demo.sh   also prints the server log
set -euo pipefail
cd "$(dirname "$0")/.."
command -v curl >/dev/null || scripts/apt-install.sh curl

mkdir -p bin
echo "building bin/bidding-server and bin/inference-sidecar-tensorflow ..." >&2
CGO_ENABLED=0 go build -o bin/ ./cmd/bidding-server ./cmd/inference-sidecar-tensorflow

log=$(mktemp)
bin/bidding-server \
  --listen 127.0.0.1:0 \
  --inference_sidecar_binary_path bin/inference-sidecar-tensorflow \
  --inference_model_bucket_name "file://$PWD/examples/bucket" \
  --inference_model_config_path model_config.json \
  2>"$log" &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -n "${DEMO_KEEP_LOG:-}" ] && { echo "--- server log ---" >&2; cat "$log" >&2; }
  rm -f "$log"
}
trap cleanup EXIT

addr=""
for _ in $(seq 1 600); do
  addr=$(sed -n 's/.*bidding-server listening.* addr=\([^ ]*\).*/\1/p' "$log" | head -n1)
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "bidding-server exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "bidding-server did not start listening" >&2; cat "$log" >&2; exit 1; }
for _ in $(seq 1 600); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "bidding-server exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://$addr/readyz" >/dev/null || { curl -sS "http://$addr/readyz" >&2; cat "$log" >&2; exit 1; }

pretty() { if command -v jq >/dev/null; then jq .; else cat; echo; fi; }
echo "== GET /v1/models"
curl -fsS "http://$addr/v1/models" | pretty
echo "== POST /v1/generateBids (examples/bidding/request.json)"
curl -fsS -X POST -H 'Content-Type: application/json' \
  --data-binary @examples/bidding/request.json "http://$addr/v1/generateBids" | pretty

kill -TERM "$pid"
wait "$pid"
echo "== bidding-server stopped cleanly" >&2
