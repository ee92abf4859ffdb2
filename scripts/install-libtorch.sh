#!/usr/bin/env bash
# install-libtorch.sh: installs Debian's libtorch (1.13, headers and shared
# libraries) for the `pytorch` build tag, when it is not installed yet.
# Idempotent and fast when already installed. With --python it also installs
# python3-torch (only needed to regenerate runtimes/pytorch/testdata with
# scripts/gen-pytorch-models.py).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pkgs=(libtorch-dev)
[ "${1:-}" = "--python" ] && pkgs+=(python3-torch)
# A private TMPDIR: apt's shared temp folder has been seen to vanish in the
# middle of this large install. apt-install.sh honours it.
if [ -z "${INFERBID_APT_TMPDIR:-}" ]; then
  INFERBID_APT_TMPDIR="$(mktemp -d /var/tmp/inferbid-apt.XXXXXX 2>/dev/null || mktemp -d)"
  trap 'rm -rf "$INFERBID_APT_TMPDIR"' EXIT
fi
TMPDIR="$INFERBID_APT_TMPDIR" "$here/apt-install.sh" "${pkgs[@]}"
if [ ! -f /usr/include/torch/script.h ]; then
  echo "install-libtorch.sh: libtorch-dev is installed but /usr/include/torch/script.h is missing" >&2
  exit 1
fi
