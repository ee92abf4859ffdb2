#!/usr/bin/env bash
# test-servers.sh: the S3 (versitygw) and GCS (fake-gcs-server) servers the
# modelstore tests run against, on 127.0.0.1.
#
#   scripts/test-servers.sh install        go install both (cached in GOPATH/bin; fast when present)
#   scripts/test-servers.sh start [DIR]    start both on free ports; prints an env file to source
#   scripts/test-servers.sh stop DIR       stop them by PID and remove DIR
#
# The Go tests start the servers themselves from the installed binaries
# (modelstore/internal/testservers), so `go test` needs only `install`. When
# INFERBID_S3_ENDPOINT / STORAGE_EMULATOR_HOST are set (source DIR/env after
# `start`), the tests use those servers instead.
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
FAKE_GCS_VERSION=v1.56.1
S3_ACCESS_KEY=inferbid
S3_SECRET_KEY=inferbid-test-secret

gobin() {
  local b
  b=$(go env GOBIN)
  [ -n "$b" ] || b="$(go env GOPATH | cut -d: -f1)/bin"
  echo "$b"
}

# installed BIN MODULE VERSION: true when BIN exists and was built from MODULE@VERSION.
installed() {
  [ -x "$1" ] && go version -m "$1" 2>/dev/null | awk '$1=="mod"{print $2, $3}' | grep -qx "$2 $3"
}

install() {
  local bin; bin=$(gobin)
  local pids=()
  if ! installed "$bin/versitygw" github.com/versity/versitygw "$VERSITYGW_VERSION"; then
    echo "installing versitygw@$VERSITYGW_VERSION from source (about 10 min on 2 cores, the S3 SDK included)" >&2
    GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" & pids+=($!)
  fi
  if ! installed "$bin/fake-gcs-server" github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION"; then
    echo "installing fake-gcs-server@$FAKE_GCS_VERSION from source (in parallel with versitygw)" >&2
    GOFLAGS=-buildvcs=false go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION" & pids+=($!)
  fi
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_http() { # URL PID NAME LOG
  for _ in $(seq 1 300); do
    if curl -s -o /dev/null "$1"; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then echo "$3 exited:" >&2; tail -20 "$4" >&2; return 1; fi
    sleep 0.1
  done
  echo "$3 did not answer within 30s" >&2; tail -20 "$4" >&2; return 1
}

start() {
  install
  local bin; bin=$(gobin)
  local dir="${1:-}"
  [ -n "$dir" ] || dir=$(mktemp -d -t inferbid-testservers-XXXXXX)
  mkdir -p "$dir/s3"
  local s3port gcsport
  s3port=$(free_port); gcsport=$(free_port)
  ROOT_ACCESS_KEY=$S3_ACCESS_KEY ROOT_SECRET_KEY=$S3_SECRET_KEY \
    setsid "$bin/versitygw" --port "127.0.0.1:$s3port" posix "$dir/s3" >"$dir/versitygw.log" 2>&1 &
  echo $! >"$dir/versitygw.pid"
  setsid "$bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$gcsport" \
    -public-host "127.0.0.1:$gcsport" -backend memory -log-level warn >"$dir/fake-gcs-server.log" 2>&1 &
  echo $! >"$dir/fake-gcs-server.pid"
  if ! wait_http "http://127.0.0.1:$s3port/" "$(cat "$dir/versitygw.pid")" versitygw "$dir/versitygw.log" ||
     ! wait_http "http://127.0.0.1:$gcsport/storage/v1/b" "$(cat "$dir/fake-gcs-server.pid")" fake-gcs-server "$dir/fake-gcs-server.log"; then
    stop "$dir"; return 1
  fi
  cat >"$dir/env" <<ENV
export INFERBID_TEST_SERVERS_DIR=$dir
export INFERBID_S3_ENDPOINT=http://127.0.0.1:$s3port
export INFERBID_S3_ACCESS_KEY=$S3_ACCESS_KEY
export INFERBID_S3_SECRET_KEY=$S3_SECRET_KEY
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export STORAGE_EMULATOR_HOST=127.0.0.1:$gcsport
ENV
  cat "$dir/env"
  echo "# source $dir/env; stop with: $0 stop $dir" >&2
}

stop() {
  local dir="$1"
  [ -d "$dir" ] || { echo "no such directory: $dir" >&2; return 1; }
  # Refuse to remove a directory this script did not make.
  [ -f "$dir/versitygw.pid" ] || [ -f "$dir/fake-gcs-server.pid" ] || { echo "$dir holds no test-server PIDs" >&2; return 1; }
  local pids=()
  for f in "$dir"/*.pid; do
    [ -f "$f" ] || continue
    local pid; pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "${1:-}" ;;
  stop) [ $# -ge 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 install | start [DIR] | stop DIR" >&2; exit 2 ;;
esac
