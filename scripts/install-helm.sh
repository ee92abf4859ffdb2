#!/usr/bin/env bash
# install-helm.sh: installs helm (pinned) into $(go env GOPATH)/bin from the Go module proxy, for the
# chart's offline checks (deploy/charttest: helm lint, helm template). No get.helm.sh, no GitHub
# release: `go install helm.sh/helm/v3/cmd/helm@VERSION`. Idempotent: when the helm on that path was
# built from the pinned module version (go version -m), it exits at once.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
helm="$(go env GOPATH)/bin/helm"

if [ -x "$helm" ] && go version -m "$helm" 2>/dev/null | grep -q "mod[[:space:]]*helm.sh/helm/v3[[:space:]]*${HELM_VERSION}[[:space:]]"; then
  exit 0
fi
GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
