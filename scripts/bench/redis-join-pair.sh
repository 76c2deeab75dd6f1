#!/usr/bin/env bash
# Usage: scripts/bench/redis-join-pair.sh BEFORE_CHECKOUT C [ROUNDS]
# scripts/bench/redis-join.sh 1 C (one node, one Redis) in BEFORE_CHECKOUT
# and in this checkout, each its own release build (cargo build --release
# --workspace in both first), alternating before, after, after, before for
# ROUNDS rounds (default 1). Per run: joins/s and p99 (wrk), and the CPU
# per join of redis-server and of the node during wrk's joins (their CPU
# time ÷ the joins served), so the two builds are compared in the same
# minutes; after each run, a SET's Redis CPU for the ratio. Each run's own output goes to $OUT/pair-<n>-<build>.err.
set -eu
cd "$(dirname "$0")/../.."
BEFORE=$1 C=$2 ROUNDS=${3:-1} OUT=${OUT:-/tmp/pair}
mkdir -p $OUT
AFTER=$(pwd)
# Redis CPU per SET on a fresh redis-server (redis-benchmark, 64
# connections, random keys), measured as the joins are: its CPU time ÷ SETs.
set_cost() {
  redis-server --port 16401 --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
  local pid=$!
  until redis-cli -p 16401 ping >/dev/null 2>&1; do sleep 0.1; done
  local c0=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
  redis-benchmark -p 16401 -n 300000 -c 64 -r 100000000000 -q SET key:__rand_int__ v >/dev/null
  awk -v a=$c0 -v b=$(awk '{print ($14+$15)/100}' /proc/$pid/stat) 'BEGIN{printf "SET: %.2f µs of Redis CPU per SET\n", (b-a)*1e6/300000}'
  kill $pid; wait $pid || true
}
run() {
  local n=$1 build=$2 dir=$3
  (cd $dir && OUT=$OUT scripts/bench/redis-join.sh 1 $C) > $OUT/pair-$n-$build.out 2> $OUT/pair-$n-$build.err
  local err=$OUT/pair-$n-$build.err
  local joins=$(grep -h 'Requests/sec' $OUT/rj-wrk-1-$C-0.log | awk '{print $2}')
  local p99=$(grep -h '    99%' $OUT/rj-wrk-1-$C-0.log | awk '{print $2}')
  local cores=$(grep -h "during wrk's joins" $err)
  local redis=$(echo "$cores" | sed -E 's/.*redis-server ([0-9.]+),.*/\1/')
  local node=$(echo "$cores" | sed -E 's/.*node\(s\) ([0-9.]+),.*/\1/')
  awk -v b=$build -v n=$n -v j=$joins -v p=$p99 -v r=$redis -v d=$node -v l="$(cat /proc/loadavg | cut -d' ' -f1)" \
    'BEGIN{printf "run %d %s: %.0f joins/s, p99 %s, Redis %.2f µs and node %.2f µs of CPU per join (load %s)\n", n, b, j, p, r*1e6/j, d*1e6/j, l}'
}
echo "start $(date -u +%H:%M:%S); before $(git -C $BEFORE log --oneline -1 | cut -c1-8), after $(git log --oneline -1 | cut -c1-8); C = $C"
n=0
for round in $(seq 1 $ROUNDS); do
  for build in before after after before; do
    n=$((n+1))
    if [ $build = before ]; then run $n before $BEFORE; else run $n after $AFTER; fi
    set_cost
  done
done
echo "end $(date -u +%H:%M:%S)"
