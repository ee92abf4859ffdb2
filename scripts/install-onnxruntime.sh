#!/usr/bin/env bash
# install-onnxruntime.sh [DEST_DIR]: installs the ONNX Runtime shared library (CPU, linux/x64) that
# runtimes/onnx dlopens, taken from the npm package onnxruntime-node. The default destination is
# <repo>/lib/onnxruntime/, where the runtime looks for it without any flag.
#
# Only `npm pack` is used (it downloads the tarball and runs no install script: a plain `npm install`
# would try to download CUDA parts from outside). Idempotent: when the library is already there and is
# the expected version, it exits at once.
set -euo pipefail

ORT_NODE_VERSION="${ORT_NODE_VERSION:-1.30.0}"
LIB_NAME="libonnxruntime.so.1"
TAR_MEMBER="package/bin/napi-v6/linux/x64/${LIB_NAME}"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${repo}/lib/onnxruntime}"
stamp="${dest}/.onnxruntime-node-version"

if [ -s "${dest}/${LIB_NAME}" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$ORT_NODE_VERSION" ]; then
  exit 0
fi

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) echo "install-onnxruntime.sh: only linux/x86_64 is supported (onnxruntime-node ships napi-v6/linux/x64)" >&2; exit 1 ;;
esac
if ! command -v npm >/dev/null; then
  "$repo/scripts/apt-install.sh" npm
fi

mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "install-onnxruntime.sh: fetching onnxruntime-node@${ORT_NODE_VERSION} with npm pack (~113 MB)" >&2
(cd "$work" && npm pack --silent --ignore-scripts "onnxruntime-node@${ORT_NODE_VERSION}" >"$work/packed.txt")
tgz="$work/$(tail -n 1 "$work/packed.txt")"
[ -f "$tgz" ] || tgz="$(ls "$work"/onnxruntime-node-*.tgz)"

tar -xzf "$tgz" -C "$work" "$TAR_MEMBER"
[ -s "$work/$TAR_MEMBER" ] || { echo "install-onnxruntime.sh: ${TAR_MEMBER} missing from the package" >&2; exit 1; }

# Write under a temporary name in the destination folder, then rename: a concurrent reader never
# sees a half-written library.
tmp="$(mktemp "${dest}/.${LIB_NAME}.XXXXXX")"
cp "$work/$TAR_MEMBER" "$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "${dest}/${LIB_NAME}"
printf '%s\n' "$ORT_NODE_VERSION" >"${stamp}.tmp" && mv -f "${stamp}.tmp" "$stamp"
echo "install-onnxruntime.sh: installed ${dest}/${LIB_NAME}" >&2
