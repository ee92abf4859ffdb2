#!/usr/bin/env bash
# install-staticcheck.sh: installs staticcheck (pinned) into $(go env GOPATH)/bin from the Go module
# proxy, for make lint: `go install honnef.co/go/tools/cmd/staticcheck@VERSION`. Idempotent: when the
# staticcheck on that path was built from the pinned module version with the go in use (go version
# -m; a staticcheck built by an older go cannot load code for a newer one), it exits at once.
set -euo pipefail

STATICCHECK_VERSION="${STATICCHECK_VERSION:-v0.8.2}"
sc="$(go env GOPATH)/bin/staticcheck"

if [ -x "$sc" ] && info="$(go version -m "$sc" 2>/dev/null)" &&
  grep -q "mod[[:space:]]*honnef.co/go/tools[[:space:]]*${STATICCHECK_VERSION}[[:space:]]" <<<"$info" &&
  head -n1 <<<"$info" | grep -q ": $(go env GOVERSION)\$"; then
  exit 0
fi
GOFLAGS=-buildvcs=false go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
