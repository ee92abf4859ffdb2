#!/usr/bin/env bash
# install-tfjs.sh: installs TensorFlow.js (tfjs-core, tfjs-backend-cpu, tfjs-converter, tfjs-layers,
# pinned) into <repo>/.cache/tfjs/, the oracle the TensorFlow runtime's op and model tests compare with
# (runtimes/tensorflow/oracle_test.go, runtimes/tensorflow/testdata/tfjs_oracle.js).
#
# Pure JavaScript on the CPU backend: no tfjs-node (native), no WebGL. `npm install --ignore-scripts`:
# none of these packages needs an install script. Idempotent: when the expected version of every
# package is installed, it exits at once. It needs Node.js and fails, saying so, without it.
set -euo pipefail

TFJS_VERSION="${TFJS_VERSION:-4.22.0}"
packages=(tfjs-core tfjs-backend-cpu tfjs-converter tfjs-layers)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${repo}/.cache/tfjs"

installed_version() {
  sed -n 's/^  "version": "\(.*\)",$/\1/p' "${prefix}/node_modules/@tensorflow/$1/package.json" 2>/dev/null | head -n 1
}

all_installed() {
  local p
  for p in "${packages[@]}"; do
    [ "$(installed_version "$p")" = "$TFJS_VERSION" ] || return 1
  done
}

if all_installed; then
  exit 0
fi

if ! command -v node >/dev/null; then
  echo "install-tfjs.sh: node is not installed; the TensorFlow.js oracle needs Node.js (/usr/bin/node)" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  "$repo/scripts/apt-install.sh" npm
fi

specs=()
for p in "${packages[@]}"; do
  specs+=("@tensorflow/${p}@${TFJS_VERSION}")
done
echo "install-tfjs.sh: installing ${specs[*]} into ${prefix}" >&2
mkdir -p "$prefix"
npm install --ignore-scripts --no-audit --no-fund --prefix "$prefix" "${specs[@]}" >&2

if ! all_installed; then
  echo "install-tfjs.sh: a TensorFlow.js package is missing or not version ${TFJS_VERSION} after npm install" >&2
  exit 1
fi
echo "install-tfjs.sh: installed TensorFlow.js ${TFJS_VERSION}" >&2
