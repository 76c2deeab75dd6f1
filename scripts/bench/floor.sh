#!/usr/bin/env bash
# Usage: scripts/bench/floor.sh TAG (after cargo build --release --workspace).
# The fan-out against its floor at 19,000 sockets on one node, memory store,
# as `waitroom-load sockets --floor` measures it (BENCHMARKS.md, issue 14
# item 4). PERF=SECONDS also records a perf profile of the whole machine
# for that long, 5 s into the node's hold, to $OUT/perf-TAG.data.
# The tool's output goes to $OUT (default /tmp).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
P=18080
WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn target/release/waitroom --listen 127.0.0.1:$P --secret s \
  > "$OUT/srv-$1.log" 2>&1 &
SPID=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:$P/healthz >/dev/null && break; sleep 0.2; done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
if [ -n "${PERF:-}" ]; then
  ( until grep -q '^holding ' "$OUT/floor-$1.log" 2>/dev/null; do sleep 0.5; done; sleep 5
    perf record -F 999 -g -a -o "$OUT/perf-$1.data" -- sleep "$PERF" \
      > /dev/null 2>&1 ) &
fi
target/release/waitroom-load sockets --url http://127.0.0.1:$P --room "floor-$1" \
  --admin-token $T --sockets 19000 --source-ips 4 --hold 30 --server-pid $SPID --floor \
  > "$OUT/floor-$1.log" 2>&1
echo "exit $? end $(date -u +%H:%M:%S) uptime: $(uptime)"
grep VmHWM /proc/$SPID/status
kill $SPID
wait 2>/dev/null
cat "$OUT/floor-$1.log"
