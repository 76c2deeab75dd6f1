#!/usr/bin/env bash
# Usage: scripts/bench/idle.sh TAG BUSY [WARMUP WINDOW] (after cargo build --release --workspace).
# Idle rooms (BENCHMARKS.md, issue 14 item 1): three nodes sharing one fresh
# Redis, 10,000 rooms of which BUSY are busy (10 waiting visitors with a
# socket each); Redis commands/s, Redis and node CPU over WINDOW s (default
# 60) after WARMUP s (default 150: the quiet window, before any room's
# heartbeat), then the SET ceiling of the same Redis. The tool's JSON goes
# to $OUT/idle-TAG.json (default /tmp), its lines to $OUT/idle-TAG.log,
# Redis's per-command counts to $OUT/idle-TAG.commandstats.
set -eu
cd "$(dirname "$0")/../.."
TAG=$1 BUSY=$2 WARMUP=${3:-150} WINDOW=${4:-60}
OUT=${OUT:-/tmp}
RPORT=16410 NAME=idle-$TAG
. scripts/bench/three-nodes.sh
target/release/waitroom-load --json idle --url "$URLLIST" --admin-token $T \
  --rooms 10000 --busy "$BUSY" --redis-url redis://127.0.0.1:$RPORT/ \
  --server-pid "$PIDLIST" --warmup "$WARMUP" --window "$WINDOW" \
  --ceiling-requests 300000 > "$OUT/idle-$TAG.json" 2> "$OUT/idle-$TAG.log" || true
redis-cli -p $RPORT info commandstats > "$OUT/idle-$TAG.commandstats"
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
kill "${PIDS[@]}" $RPID
wait 2>/dev/null || true
tail -12 "$OUT/idle-$TAG.log"
