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
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
RPORT=16410
redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/idle-redis-$TAG.log" 2>&1 &
RPID=$!
sleep 1
PIDS=() URLS=()
for i in 0 1 2; do
  WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn target/release/waitroom --listen 127.0.0.1:$((18481 + i)) \
    --redis-url redis://127.0.0.1:$RPORT/ --secret s > "$OUT/idle-srv-$TAG-$i.log" 2>&1 &
  PIDS+=($!) URLS+=(http://127.0.0.1:$((18481 + i)))
done
for u in "${URLS[@]}"; do until curl -sf "$u/healthz" >/dev/null; do sleep 0.2; done; done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
target/release/waitroom-load --json idle --url "$(IFS=,; echo "${URLS[*]}")" --admin-token $T \
  --rooms 10000 --busy "$BUSY" --redis-url redis://127.0.0.1:$RPORT/ \
  --server-pid "$(IFS=,; echo "${PIDS[*]}")" --warmup "$WARMUP" --window "$WINDOW" \
  --ceiling-requests 300000 > "$OUT/idle-$TAG.json" 2> "$OUT/idle-$TAG.log" || true
redis-cli -p $RPORT info commandstats > "$OUT/idle-$TAG.commandstats"
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
kill "${PIDS[@]}" $RPID
wait 2>/dev/null || true
tail -12 "$OUT/idle-$TAG.log"
