#!/usr/bin/env bash
# run.sh: a sidecar alone, driven by inferctl (README.md, "Running it").
# Starts bin/inference-sidecar-tensorflow on a socket in a fresh private
# directory, registers the three models of examples/bucket, lists them,
# runs examples/inferctl/batch.json (one entry per model, the rows of the
# "running-shoes" interest group of examples/bidding/request.json), and
# stops the sidecar. make demo builds the two binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
for b in bin/inferctl bin/inference-sidecar-tensorflow; do
  [ -x "$b" ] || { echo "$b is missing: run make demo first (it builds it)" >&2; exit 1; }
done
dir=$(mktemp -d)
sock="$dir/sock"
bin/inference-sidecar-tensorflow --socket "$sock" 2>"$dir/sidecar.log" &
sidecar=$!
trap 'kill "$sidecar" 2>/dev/null; wait "$sidecar" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do
  [ -S "$sock" ] && break
  kill -0 "$sidecar" 2>/dev/null || { echo "the sidecar exited:" >&2; cat "$dir/sidecar.log" >&2; exit 1; }
  sleep 0.1
done
[ -S "$sock" ] || { echo "the sidecar did not create $sock within 30 s" >&2; cat "$dir/sidecar.log" >&2; exit 1; }

run() { echo "\$ $*"; "$@"; }
for m in pctr/v1 pctr/v2 pcvr/v1; do
  run bin/inferctl --socket "$sock" register --model-path "$m/" "examples/bucket/$m"
done
run bin/inferctl --socket "$sock" models
run bin/inferctl --socket "$sock" predict examples/inferctl/batch.json
