#!/usr/bin/env bash
# Usage: scripts/bench/opening.sh memory|redis TAG (after cargo build --release --workspace).
# The opening of a room with a million pre-queued, 19,000 of them on sockets,
# one node, as `waitroom-load opening` measures it (BENCHMARKS.md, issue 13).
# PIN=1 runs Redis alone on CPU 1 and the node and the tool on CPU 0.
# The tool's JSON and log go to $OUT (default /tmp).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
TOOL=target/release/waitroom-load
SRV=target/release/waitroom
P=18700
PIN_REDIS=(); PIN_REST=()
if [ "${PIN:-0}" = 1 ]; then PIN_REDIS=(taskset -c 1); PIN_REST=(taskset -c 0); fi
RARGS=()
if [ "$1" = redis ]; then
  RPORT=18799
  "${PIN_REDIS[@]}" redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis-$2.log" 2>&1 &
  RPID=$!
  sleep 1
  RARGS=(--redis-url redis://127.0.0.1:$RPORT/)
fi
WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn "${PIN_REST[@]}" $SRV --drain-s 0 --listen 127.0.0.1:$P --secret s "${RARGS[@]}" > "$OUT/srv-$2.log" 2>&1 &
SPID=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:$P/healthz >/dev/null && break; sleep 0.2; done
sleep 1
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
"${PIN_REST[@]}" $TOOL --json opening --url http://127.0.0.1:$P --admin-token $T --room "open-$2" \
  --visitors 1000000 --sockets 19000 --source-ips 2 --lead 5 --after 10 --probe-rate 200 "${RARGS[@]}" \
  > "$OUT/$2.json" 2> "$OUT/$2.log"
echo "exit $? end $(date -u +%H:%M:%S) uptime: $(uptime)"
grep VmHWM /proc/$SPID/status
[ "$1" = redis ] && redis-cli -p $RPORT info memory | grep used_memory_human
kill $SPID; [ "$1" = redis ] && kill $RPID
wait 2>/dev/null
cat "$OUT/$2.log"
