#!/usr/bin/env bash
# install-node-peer.sh: installs onnxruntime-node (CPU, linux/x64) into <repo>/.cache/node-peer/, for the
# Node.js peer of the peer comparison (bench/peer/onnx_peer.js, bench/doc.go). The harness finds it there.
#
# `npm install --ignore-scripts`: the package's postinstall only downloads GPU parts (from outside the
# registry, which fails here); the CPU library is in the package itself (bin/napi-v6/linux/x64/).
# Idempotent: when the expected version is installed, it exits at once. It needs Node.js (the peer is
# measured on /usr/bin/node, Node.js 20) and fails, saying so, without it.
set -euo pipefail

ORT_NODE_VERSION="${ORT_NODE_VERSION:-1.30.0}"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${repo}/.cache/node-peer"
pkg="${prefix}/node_modules/onnxruntime-node"
binding="${pkg}/bin/napi-v6/linux/x64/onnxruntime_binding.node"

installed_version() {
  sed -n 's/^  "version": "\(.*\)",$/\1/p' "${pkg}/package.json" 2>/dev/null | head -n 1
}

if [ -s "$binding" ] && [ "$(installed_version)" = "$ORT_NODE_VERSION" ]; then
  exit 0
fi

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) echo "install-node-peer.sh: only linux/x86_64 is supported (onnxruntime-node ships napi-v6/linux/x64)" >&2; exit 1 ;;
esac
if ! command -v node >/dev/null; then
  echo "install-node-peer.sh: node is not installed; the peer comparison needs Node.js 20 (/usr/bin/node)" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  "$repo/scripts/apt-install.sh" npm
fi

echo "install-node-peer.sh: installing onnxruntime-node@${ORT_NODE_VERSION} into ${prefix}" >&2
mkdir -p "$prefix"
npm install --ignore-scripts --no-audit --no-fund --prefix "$prefix" "onnxruntime-node@${ORT_NODE_VERSION}" >&2

if [ ! -s "$binding" ] || [ "$(installed_version)" != "$ORT_NODE_VERSION" ]; then
  echo "install-node-peer.sh: ${binding} missing or not version ${ORT_NODE_VERSION} after npm install" >&2
  exit 1
fi
echo "install-node-peer.sh: installed onnxruntime-node@${ORT_NODE_VERSION}" >&2
