#!/usr/bin/env bash
# Usage: scripts/bench/notify.sh TAG [TOOL ARGS…] (after cargo build --release).
# Notifications (BENCHMARKS.md, issue 46): a fresh Redis on $RPORT (default
# 16393), $NODES nodes (default 3) sharing it, allowed to call loopback,
# `--notify-per-ip 10000`; then `waitroom-load notify` with --redis-url and
# --server-pid set and the arguments given after TAG (default: 10,000
# visitors, each with a contact of 20 characters, 2 % of first attempts
# answered 500, admitted 1,000 a tick of 100 ms, until every event is
# delivered). The tool's JSON goes to $OUT/notify-TAG.json (default /tmp),
# its lines to $OUT/notify-TAG.log; BIN names the release binaries'
# directory (default target/release).
set -eu
cd "$(dirname "$0")/../.."
TAG=$1
shift
OUT=${OUT:-/tmp} RPORT=${RPORT:-16393} NAME=notify-$TAG
NODE_FLAGS="--outbound-allow-networks 127.0.0.0/8 --notify-per-ip 10000 --public-url http://127.0.0.1:18481"
. scripts/bench/three-nodes.sh
[ $# -gt 0 ] || set -- --visitors 10000
"$BIN/waitroom-load" --json notify --url "$URLLIST" --room "notify-$TAG" --admin-token $T \
  --redis-url redis://127.0.0.1:$RPORT/ --server-pid "$PIDLIST" "$@" \
  > "$OUT/notify-$TAG.json" 2> "$OUT/notify-$TAG.log" || true
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
kill "${PIDS[@]}" $RPID
wait 2>/dev/null || true
grep -Ev '^[0-9]+ s: ' "$OUT/notify-$TAG.log"
