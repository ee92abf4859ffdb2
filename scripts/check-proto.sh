#!/usr/bin/env bash
# Fails when the committed generated code in proto/inferencepb,
# proto/kservepb, proto/jsworkerpb or proto/tfservingpb is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs="inferencepb kservepb jsworkerpb tfservingpb"
for p in $pkgs; do
  cp -r "proto/$p" "$tmp/$p"
done
go generate ./proto/...
stale=0
for p in $pkgs; do
  if ! diff -r "$tmp/$p" "proto/$p" >/dev/null; then
    # || true: diff exits 1 here, which pipefail would turn into an exit
    # before the files are restored.
    diff -r "$tmp/$p" "proto/$p" | head -20 >&2 || true
    cp -r "$tmp/$p/." "proto/$p/"
    echo "proto/$p is stale: run 'make proto' and commit the result" >&2
    stale=1
  fi
done
exit $stale
