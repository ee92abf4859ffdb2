#!/usr/bin/env bash
# gen-wasm.sh: rebuilds the committed .wasm files from their .wat sources
# (jsbridge/testdata/wasm, examples/wasmhelper) with Debian's wabt, installing
# it when missing. jsbridge's TestWasmTestdataUpToDate checks the result.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wat2wasm >/dev/null || scripts/apt-install.sh wabt
for f in jsbridge/testdata/wasm/*.wat examples/wasmhelper/*.wat; do
  wat2wasm "$f" -o "${f%.wat}.wasm"
done
