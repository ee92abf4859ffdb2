#!/usr/bin/env bash
# Fails when the committed generated code in proto/inferencepb is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r proto/inferencepb "$tmp/before"
go generate ./proto/...
if ! diff -r "$tmp/before" proto/inferencepb >/dev/null; then
  # || true: diff exits 1 here, which pipefail would turn into an exit
  # before the files are restored.
  diff -r "$tmp/before" proto/inferencepb | head -20 >&2 || true
  cp -r "$tmp/before/." proto/inferencepb/
  echo "proto/inferencepb is stale: run 'make proto' and commit the result" >&2
  exit 1
fi
