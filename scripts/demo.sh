#!/usr/bin/env bash
# demo.sh: the README's main command. Builds bidding-server, the TensorFlow
# sidecar and inferctl into bin/, starts bidding-server on the embedded
# example module (examples/bidding/generate_bid.js) with the sample bucket
# examples/bucket as a file:// bucket, waits until it is ready (sidecar
# healthy, first model sync done), lists the models, POSTs
# examples/bidding/request.json to /v1/generateBids, prints the bids, stops
# the server with SIGTERM and prints three commands to try next.
#
#   scripts/demo.sh            (or: make demo)
#   DEMO_KEEP_LOG=1 scripts/demo.sh   also prints the server log
#
# The results go to standard output; what the demo is doing, and how long
# each step took, to standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v curl >/dev/null || scripts/step.sh "installing curl" scripts/apt-install.sh curl >&2

mkdir -p bin
scripts/step.sh "building bin/bidding-server, bin/inference-sidecar-tensorflow and bin/inferctl (on 2 cores: about 2 min cold, 13 min on a fresh machine that first downloads the Go modules, seconds when cached)" \
  env CGO_ENABLED=0 go build -ldflags "-X github.com/inferbid/inferbid/internal/cli.Commit=$(git rev-parse HEAD 2>/dev/null || true)" \
  -o bin/ ./cmd/bidding-server ./cmd/inference-sidecar-tensorflow ./cmd/inferctl >&2

log=$(mktemp)
started=$EPOCHREALTIME
echo "==> starting bin/bidding-server and waiting for /readyz: the sidecar started and the 3 models of examples/bucket loaded (a few seconds) ..." >&2
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
[ -n "$addr" ] || { echo "bidding-server did not start listening within 60 s" >&2; cat "$log" >&2; exit 1; }
for _ in $(seq 1 600); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "bidding-server exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://$addr/readyz" >/dev/null || { curl -sS "http://$addr/readyz" >&2; cat "$log" >&2; exit 1; }
echo "==> ready in $(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }') at http://$addr" >&2

pretty() { if command -v jq >/dev/null; then jq .; else cat; echo; fi; }
echo "== GET /v1/models"
curl -fsS "http://$addr/v1/models" | pretty
echo "== POST /v1/generateBids (examples/bidding/request.json)"
curl -fsS -X POST -H 'Content-Type: application/json' \
  --data-binary @examples/bidding/request.json "http://$addr/v1/generateBids" | pretty

stopping=$EPOCHREALTIME
echo "==> stopping bidding-server with SIGTERM (/readyz answers 503 for --drain_period, 5 s by default, then requests in flight finish) ..." >&2
kill -TERM "$pid"
wait "$pid"
echo "==> bidding-server stopped cleanly in $(awk -v a="$stopping" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }')" >&2

# Three commands that work from here (examples/examples_test.go runs them).
cat <<'NEXT'
== next, try:
  examples/inferctl/run.sh    # a sidecar alone, driven by bin/inferctl: register, models, predict examples/inferctl/batch.json
  DEMO_KEEP_LOG=1 make demo   # this demo again, with the server's log: sidecar start, model sync, a line per bid
  bin/bidding-server -help    # every flag and its default (README.md, "Running it", says what they do)
NEXT
