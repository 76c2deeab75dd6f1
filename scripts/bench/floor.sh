#!/usr/bin/env bash
# Usage: scripts/bench/floor.sh TAG [NODES] (after cargo build --release --workspace).
# The fan-out against its floor, as `waitroom-load sockets --floor` measures
# it (BENCHMARKS.md, issue 14 item 4): NODES 1 (the default) holds 19,000
# sockets to one node on the memory store; more nodes share one Redis and
# hold 17,000 each (PER_NODE=N for another count: six nodes of 16,700 hold
# 100,200), one tool process per node meeting the others at a barrier, each
# binding source addresses of its own in 127.0.0.0/8 (the tool's
# --source-ips: 127.P.Q.k, P.Q its node's port). TICK_MS=N sets the room's
# tick (default 1000), OPEN=N the handshakes each tool has in flight
# (default 256). Over WINDOW seconds (default 20) from 5 s into the
# hold it also prints each node's CPU per tick per 1,000 of its sockets
# and, with Redis, Redis's CPU per tick. PERF=SECONDS also records a perf
# profile of the whole machine for that long, 5 s into the nodes' hold, to
# $OUT/perf-TAG.data. The tools' output goes to $OUT (default /tmp):
# floor-TAG-N.log for node N.
set -u
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
TAG=$1
NODES=${2:-1}
OUT=${OUT:-/tmp}
mkdir -p "$OUT"
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
P=18090
STORE=()
PER_NODE=${PER_NODE:-19000}
TICK_MS=${TICK_MS:-1000}
WINDOW=${WINDOW:-20}
BARRIER=()
if [ "$NODES" -gt 1 ]; then
  RPORT=16390
  redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis-$TAG.log" 2>&1 &
  RPID=$!
  own $RPID $RPORT || exit 1
  STORE=(--redis-url redis://127.0.0.1:$RPORT/)
  PER_NODE=${PER_NODE:-17000}
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
  own "${PIDS[$i]}" $((P + i)) || exit 1
  for _ in $(seq 50); do curl -sf http://127.0.0.1:$((P + i))/healthz >/dev/null && break; sleep 0.2; done
done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
# Each node's CPU (and Redis's) over WINDOW seconds from 5 s into the hold,
# per tick of the room and per 1,000 of the node's sockets.
( until grep -q '^holding ' "$OUT/floor-$TAG-0.log" 2>/dev/null; do sleep 0.5; done; sleep 5
  if [ -n "${RPID:-}" ]; then
    redis-cli -p $RPORT CONFIG SET slowlog-log-slower-than 0 >/dev/null
    redis-cli -p $RPORT CONFIG SET slowlog-max-len 1000000 >/dev/null
    redis-cli -p $RPORT SLOWLOG RESET >/dev/null
  fi
  before=(); for pid in "${PIDS[@]}" ${RPID:-}; do before+=("$(cpu $pid)"); done
  sleep "$WINDOW"
  # The kernel's side, outside every process's resident memory: both ends
  # of each loopback connection (the tools' and the nodes').
  echo "window: kernel $(grep '^TCP:' /proc/net/sockstat) (mem in pages of $(getconf PAGESIZE) B)"
  awk '/^(TCP|sock_inode_cache|filp|eventpoll_epi) /{t += $2 * $4; printf "%s %d × %d B, ", $1, $2, $4}
    END{printf "in all %.1f MiB\n", t / 1048576}' /proc/slabinfo | sed 's/^/window: kernel objects: /'
  ticks=$(awk -v w="$WINDOW" -v t="$TICK_MS" 'BEGIN{print w * 1000 / t}')
  i=0
  for pid in "${PIDS[@]}"; do
    awk -v a="${before[$i]}" -v b="$(cpu $pid)" -v n="$ticks" -v s="$PER_NODE" -v i=$i \
      'BEGIN{printf "window: node %d CPU %.3f s over %d ticks: %.2f ms per tick, %.3f ms per tick per 1,000 sockets\n", i, b-a, n, (b-a)*1000/n, (b-a)*1000/n/(s/1000)}'
    i=$((i + 1))
  done
  if [ -n "${RPID:-}" ]; then
    awk -v a="${before[$i]}" -v b="$(cpu $RPID)" -v n="$ticks" \
      'BEGIN{printf "window: Redis CPU %.3f s over %d ticks: %.2f ms per tick\n", b-a, n, (b-a)*1000/n}'
    # Every command of the window with its own time (the slow log at 0 µs),
    # by script: the tick's calls against the presence marks' (each node
    # marks its sockets' visitors every 5 s, 500 a call).
    redis-cli -p $RPORT --json SLOWLOG GET -1 | python3 -c '
import json, sys
from collections import defaultdict
calls = defaultdict(lambda: [0, 0, 0])
for entry in json.load(sys.stdin):
    args = entry[3]
    name = args[0].lower() + (" " + args[1][:8] if args[0].lower() == "evalsha" else "")
    calls[name][0] += 1; calls[name][1] += entry[2]; calls[name][2] += len(args)
for name, (n, us, argc) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
    print("window: Redis %s: %d calls, %.1f ms in all, %.1f µs a call, %.0f arguments a call" % (name, n, us / 1000, us / n, argc / n))
'
  fi ) > "$OUT/window-$TAG.log" 2>&1 &
if [ -n "${PERF:-}" ]; then
  ( until grep -q '^holding ' "$OUT/floor-$TAG-0.log" 2>/dev/null; do sleep 0.5; done; sleep 5
    perf record -F 999 -g -a -o "$OUT/perf-$TAG.data" -- sleep "$PERF" > /dev/null 2>&1 ) &
fi
PIDLIST=$(IFS=,; echo "${PIDS[*]}")
TOOLS=()
for ((i = 0; i < NODES; i++)); do
  target/release/waitroom-load sockets --url http://127.0.0.1:$((P + i)) --room "floor-$TAG" \
    --admin-token $T --sockets $PER_NODE --source-ips 4 --open-concurrency "${OPEN:-256}" --hold 30 --tick-ms "$TICK_MS" --server-pid "$PIDLIST" --floor \
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
cat "$OUT/window-$TAG.log"
