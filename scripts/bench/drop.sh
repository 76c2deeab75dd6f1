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
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
RPORT=16391
redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/drop-redis-$TAG.log" 2>&1 &
RPID=$!
sleep 1
PIDS=() URLS=()
for i in 0 1 2; do
  WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn target/release/waitroom --listen 127.0.0.1:$((18481 + i)) \
    --redis-url redis://127.0.0.1:$RPORT/ --secret s > "$OUT/drop-srv-$TAG-$i.log" 2>&1 &
  PIDS+=($!) URLS+=(http://127.0.0.1:$((18481 + i)))
done
for u in "${URLS[@]}"; do until curl -sf "$u/healthz" >/dev/null; do sleep 0.2; done; done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
target/release/waitroom-load --json drop --url "$(IFS=,; echo "${URLS[*]}")" \
  --room drop-50k --admin-token $T --visitors 50000 --arrive-over 10 --stock 10000 \
  --admit-per-tick 1750 --tick-ms 500 --duration 120 --source-ips 4 \
  --server-pid "$(IFS=,; echo "${PIDS[*]}")" > "$OUT/drop-$TAG.json" 2> "$OUT/drop-$TAG.log" || true
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
kill "${PIDS[@]}" $RPID
wait 2>/dev/null || true
tail -25 "$OUT/drop-$TAG.log"
