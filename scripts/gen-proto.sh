#!/usr/bin/env bash
# Regenerates proto/inferencepb and proto/jsworkerpb from proto/*.proto and proto/kservepb from
# proto/kserve/*.proto. Installs protoc (Debian's
# protobuf-compiler) and the pinned Go plugins when missing. The entry point
# is `go generate ./proto/...` (the directive in proto/inferencepb/doc.go;
# `make proto` runs it), which runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
if ! command -v protoc >/dev/null; then
  scripts/apt-install.sh protobuf-compiler
fi
gobin=$(go env GOPATH)/bin
export PATH="$gobin:$PATH"
want_go="protoc-gen-go $PROTOC_GEN_GO_VERSION"
if [ "$(protoc-gen-go --version 2>/dev/null)" != "$want_go" ]; then
  go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION
fi
if ! protoc-gen-go-grpc --version 2>/dev/null | grep -q "${PROTOC_GEN_GO_GRPC_VERSION#v}"; then
  go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION
fi
protoc -I proto \
  --go_out=. --go_opt=module=github.com/inferbid/inferbid \
  --go-grpc_out=. --go-grpc_opt=module=github.com/inferbid/inferbid \
  proto/*.proto proto/kserve/*.proto
