#!/usr/bin/env bash
# Regenerates proto/inferencepb and proto/jsworkerpb from proto/*.proto, proto/kservepb from
# proto/kserve/*.proto and proto/tfservingpb from TF Serving's official API protos in
# proto/tfserving (whose TensorFlow imports resolve against the pure-Go protos of
# github.com/wamuir/graft: internal/cmd/tfprotodesc hands them to protoc as a descriptor set,
# so no TensorFlow .proto is vendored and only the serving protos are generated). Installs protoc (Debian's
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

# TF Serving: every file of the closure goes to one Go package (the .proto
# files, vendored unchanged, name none).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./internal/cmd/tfprotodesc >"$tmp/tf.pb"
tfs_files=$(cd proto/tfserving && ls tensorflow_serving/*/*.proto)
tfs_m=""
for f in $tfs_files; do
  tfs_m="$tfs_m,M$f=github.com/inferbid/inferbid/proto/tfservingpb"
done
tfs_args=()
for f in $tfs_files; do
  tfs_args+=("proto/tfserving/$f")
done
rm -f proto/tfservingpb/*.pb.go
protoc --descriptor_set_in="$tmp/tf.pb" -I proto/tfserving \
  --go_out=. --go_opt="module=github.com/inferbid/inferbid$tfs_m" \
  --go-grpc_out=. --go-grpc_opt="module=github.com/inferbid/inferbid$tfs_m" \
  "${tfs_args[@]}"
