#!/usr/bin/env bash
# step.sh DESCRIPTION COMMAND [ARGS...]: runs one long step of make (an
# install, a build, a check) so that it is never silent: it prints
# "==> DESCRIPTION ..." before, "    ... still at it after 2m0s: STEP"
# each minute until it ends, and "==> STEP: done in 1m12s" (or "FAILED
# after ..., exit status N") after, where STEP is DESCRIPTION without its
# parenthesized estimate. The command runs in the
# foreground (^C reaches it); its exit status is step.sh's.
#
# DESCRIPTION says what the step does and, for a step that can be long, an
# honest estimate ("about 2 min cold on 2 cores; seconds when cached").
# INFERBID_STEP_HEARTBEAT sets the interval in seconds (default 60).
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DESCRIPTION COMMAND [ARGS...]" >&2
  exit 2
fi
desc=$1
shift
interval=${INFERBID_STEP_HEARTBEAT:-60}

# duration SECONDS_AS_DECIMAL: 4.2s under a minute, 1m12s, 1h2m3s.
duration() {
  awk -v s="$1" 'BEGIN {
    if (s < 60) { printf "%.1fs", s; exit }
    s = int(s + 0.5); h = int(s / 3600); m = int((s % 3600) / 60); r = s % 60
    if (h > 0) printf "%dh%dm%ds", h, m, r; else printf "%dm%ds", m, r
  }'
}

start=$EPOCHREALTIME
SECONDS=0
echo "==> $desc ..."
parent=$$
(
  # The heartbeat: a subshell that stops with this script (checked each
  # second, so that no sleep outlives it for long). SECONDS keeps counting
  # in it.
  trap - EXIT
  next=$interval
  while sleep 1 </dev/null >/dev/null 2>&1; do
    kill -0 "$parent" 2>/dev/null || exit 0
    if [ "$SECONDS" -ge "$next" ]; then
      echo "    ... still at it after $(duration "$SECONDS"): ${desc%% (*}"
      next=$((next + interval))
    fi
  done
) &
heartbeat=$!
trap 'kill "$heartbeat" 2>/dev/null' EXIT

"$@"
rc=$?
kill "$heartbeat" 2>/dev/null
wait "$heartbeat" 2>/dev/null
took=$(duration "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')")
# The end line names the step without its estimate: "building x (about
# 2 min cold)" ends as "building x: done in 4.1s".
short=${desc%% (*}
if [ "$rc" -eq 0 ]; then
  echo "==> $short: done in $took"
else
  echo "==> $short: FAILED after $took, exit status $rc"
fi
exit "$rc"
