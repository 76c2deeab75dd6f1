#!/usr/bin/env bash
# Usage: scripts/bench/floor3.sh TAG (after cargo build --release --workspace).
# The fan-out against its floor at 51,000 sockets on three nodes sharing one
# Redis (17,000 per node, one tool process per node meeting at a barrier),
# as `waitroom-load sockets --floor` measures it (BENCHMARKS.md, issue 14
# item 4). PERF=SECONDS also records a perf profile of the whole machine
# for that long, 5 s into the nodes' hold, to $OUT/perf-TAG.data.
# The tool's output goes to $OUT (default /tmp).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
RPORT=16390
redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis3-$1.log" 2>&1 &
RPID=$!
sleep 1
PIDS=()
for i in 0 1 2; do
  WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn target/release/waitroom --listen 127.0.0.1:$((18090+i)) \
    --secret s --redis-url redis://127.0.0.1:$RPORT/ > "$OUT/srv3-$1-$i.log" 2>&1 &
  PIDS+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 50); do curl -sf http://127.0.0.1:$((18090+i))/healthz >/dev/null && break; sleep 0.2; done
done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
B=$OUT/barrier-$1; rm -rf "$B"; mkdir -p "$B"
PIDLIST=$(IFS=,; echo "${PIDS[*]}")
if [ -n "${PERF:-}" ]; then
  ( until grep -q '^holding ' "$OUT/floor3-$1-0.log" 2>/dev/null; do sleep 0.5; done; sleep 5
    perf record -F 999 -g -a -o "$OUT/perf-$1.data" -- sleep "$PERF" > /dev/null 2>&1 ) &
fi
TOOLS=()
for i in 0 1 2; do
  target/release/waitroom-load sockets --url http://127.0.0.1:$((18090+i)) --room "hold-$1" \
    --admin-token $T --sockets 17000 --source-ips 4 --hold 30 --server-pid "$PIDLIST" --floor \
    --barrier-dir "$B" --barrier-parties 3 > "$OUT/floor3-$1-$i.log" 2>&1 &
  TOOLS+=($!)
done
wait "${TOOLS[@]}"
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
kill "${PIDS[@]}" $RPID
wait 2>/dev/null
grep -A3 "all 3 processes" "$OUT/floor3-$1-0.log"
