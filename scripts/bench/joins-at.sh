#!/usr/bin/env bash
# Usage: scripts/bench/joins-at.sh CHECKOUT TAG C
# The joins row (scripts/bench/rows.sh's, memory store) at concurrency C,
# against CHECKOUT's release build, with this checkout's load tool: joins/s
# and the node's CPU per join (after cargo build --release --workspace).
# With PERF=1, perf samples the node (cpu-clock, 6 s from 4 s in; the runs
# are slower under it) and prints the allocator's share of its samples.
set -eu
. "$(dirname "$0")/own.sh"
DIR=$1 TAG=$2 C=$3 PORT=18720 OUT=${OUT:-/tmp}
T=bench-admin-token-0123456789abcdef
TOOL=${TOOL:-target/release/waitroom-load}
WAITROOM_ADMIN_TOKEN=$T $DIR/target/release/waitroom --drain-s 0 --listen 127.0.0.1:$PORT \
  > $OUT/at-$TAG.server.log 2>&1 &
pid=$!
own $pid $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done; sleep 1
$TOOL --json join --url http://127.0.0.1:$PORT --room bench-c$C --admin-token $T --create-room \
  --concurrency $C --server-pid $pid --rounds 2 --duration 5 > $OUT/at-$TAG.json 2>/dev/null &
tool=$!
if [ "${PERF:-0}" = 1 ]; then
  sleep 4
  perf record -e cpu-clock -F 1999 -p $pid -o $OUT/at-$TAG.perf.data -- sleep 6 >/dev/null 2>&1
fi
wait $tool
kill $pid; wait $pid || true
python3 -c "
import json
j = json.load(open('$OUT/at-$TAG.json'))['join']
print('$TAG', round(j['per_s']), 'joins/s;', round(j['server_cpu_us_per_request'], 2), 'µs of node CPU per join')
"
if [ "${PERF:-0}" = 1 ]; then
  perf report -i $OUT/at-$TAG.perf.data --stdio --no-children --sort dso,sym 2>/dev/null \
    | awk -v tag=$TAG '$2 ~ /libc/ {libc += $1} /\] (_int_malloc|malloc_consolidate)$/ {print tag, $NF, $1}
        END {printf "%s libc %.2f%% of the node'"'"'s samples\n", tag, libc}'
fi
