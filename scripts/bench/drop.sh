#!/usr/bin/env bash
# Usage: scripts/bench/drop.sh TAG (after cargo build --release --workspace).
# A drop of 50,000 end to end (BENCHMARKS.md, issue 14 item 5): three nodes
# sharing one fresh Redis, `waitroom-load drop` with the room and sale of
# BENCHMARKS.md. The tool's JSON goes to $OUT/drop-TAG.json (default /tmp),
# its lines to $OUT/drop-TAG.log.
set -eu
cd "$(dirname "$0")/../.."
TAG=$1
OUT=${OUT:-/tmp}
RPORT=16391 NAME=drop-$TAG
. scripts/bench/three-nodes.sh
target/release/waitroom-load --json drop --url "$URLLIST" \
  --room drop-50k --admin-token $T --visitors 50000 --arrive-over 10 --stock 10000 \
  --admit-per-tick 1750 --tick-ms 500 --duration 120 --source-ips 4 \
  --server-pid "$PIDLIST" > "$OUT/drop-$TAG.json" 2> "$OUT/drop-$TAG.log" || true
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
kill "${PIDS[@]}" $RPID
wait 2>/dev/null || true
tail -25 "$OUT/drop-$TAG.log"
