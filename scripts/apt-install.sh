#!/usr/bin/env bash
# apt-install.sh PKG...: installs Debian packages that are not installed yet
# (as root, or through sudo). apt-get update runs once per machine.
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# A private TMPDIR: apt's temp folder has vanished mid-install on these machines.
export TMPDIR="${TMPDIR:-$(mktemp -d)}"
mkdir -p "$TMPDIR"
stamp=/var/lib/apt/periodic/inferbid-update-stamp
# Refresh the package lists once per machine, and again whenever one of the
# packages has no install candidate in the lists we have.
candidates=$(apt-cache policy "${missing[@]}" 2>/dev/null | grep -c 'Candidate: [^(]' || true)
if [ ! -f "$stamp" ] || [ "$candidates" -lt ${#missing[@]} ]; then
  $sudo apt-get update -q >/dev/null
  $sudo mkdir -p "$(dirname "$stamp")" && $sudo touch "$stamp"
fi
echo "installing Debian packages: ${missing[*]}" >&2
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
