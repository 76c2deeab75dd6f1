#!/usr/bin/env bash
# Usage: scripts/bench/floor.sh TAG [NODES] (after cargo build --release --workspace).
# The fan-out against its floor, as `waitroom-load sockets --floor` measures
# it (BENCHMARKS.md, issue 14 item 4): NODES 1 (the default) holds 19,000
# sockets to one node on the memory store; NODES 3 holds 51,000 to three
# nodes sharing one Redis, 17,000 each, one tool process per node meeting
# the others at a barrier. PERF=SECONDS also records a perf profile of the
# whole machine for that long, 5 s into the nodes' hold, to
# $OUT/perf-TAG.data. The tools' output goes to $OUT (default /tmp):
# floor-TAG-N.log for node N.
set -u
cd "$(dirname "$0")/../.."
TAG=$1
NODES=${2:-1}
OUT=${OUT:-/tmp}
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
P=18090
STORE=()
PER_NODE=19000
BARRIER=()
if [ "$NODES" -gt 1 ]; then
  RPORT=16390
  redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis-$TAG.log" 2>&1 &
  RPID=$!
  sleep 1
  STORE=(--redis-url redis://127.0.0.1:$RPORT/)
  PER_NODE=17000
  rm -rf "$OUT/barrier-$TAG"; mkdir -p "$OUT/barrier-$TAG"
  BARRIER=(--barrier-dir "$OUT/barrier-$TAG" --barrier-parties "$NODES")
fi
PIDS=()
for ((i = 0; i < NODES; i++)); do
  WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn target/release/waitroom --drain-s 0 --listen 127.0.0.1:$((P + i)) \
    --secret s "${STORE[@]}" > "$OUT/srv-$TAG-$i.log" 2>&1 &
  PIDS+=($!)
done
for ((i = 0; i < NODES; i++)); do
  for _ in $(seq 50); do curl -sf http://127.0.0.1:$((P + i))/healthz >/dev/null && break; sleep 0.2; done
done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
if [ -n "${PERF:-}" ]; then
  ( until grep -q '^holding ' "$OUT/floor-$TAG-0.log" 2>/dev/null; do sleep 0.5; done; sleep 5
    perf record -F 999 -g -a -o "$OUT/perf-$TAG.data" -- sleep "$PERF" > /dev/null 2>&1 ) &
fi
PIDLIST=$(IFS=,; echo "${PIDS[*]}")
TOOLS=()
for ((i = 0; i < NODES; i++)); do
  target/release/waitroom-load sockets --url http://127.0.0.1:$((P + i)) --room "floor-$TAG" \
    --admin-token $T --sockets $PER_NODE --source-ips 4 --hold 30 --server-pid "$PIDLIST" --floor \
    "${BARRIER[@]}" > "$OUT/floor-$TAG-$i.log" 2>&1 &
  TOOLS+=($!)
done
wait "${TOOLS[@]}"
echo "end $(date -u +%H:%M:%S) uptime: $(uptime)"
for pid in "${PIDS[@]}"; do grep VmHWM /proc/$pid/status; done
kill "${PIDS[@]}"
[ "$NODES" -gt 1 ] && kill $RPID
wait 2>/dev/null
if [ "$NODES" -gt 1 ]; then grep -A3 "all $NODES processes" "$OUT/floor-$TAG-0.log"; else cat "$OUT/floor-$TAG-0.log"; fi
