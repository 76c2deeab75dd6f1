#!/usr/bin/env bash
# Usage: scripts/bench/redis-join.sh NODES C (after cargo build --release --workspace).
# HTTP joins/s (the page's body) on NODES nodes sharing one Redis, between two
# redis-benchmark runs of the join script itself (EVALSHA, C connections) on the same Redis.
# The joins are sent twice, 10 s each: by waitroom-load's join mode (reqwest), then
# by wrk (scripts/bench/join.lua, one single-threaded wrk per node, C connections
# in all), a client that leaves more of the 2 cores to Redis and the nodes.
# Figures go to stdout and stderr; the tool's JSON and wrk's output to $OUT (default /tmp).
set -eu
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
NODES=$1 C=$2 RPORT=16400 PORT=18500 N=300000
ulimit -n 20000
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
# CPU seconds of several processes, and of the whole machine (busy, of all cores).
cpus() { local t=0; for p in "$@"; do t=$(awk -v t=$t -v c=$(cpu $p) 'BEGIN{print t+c}'); done; echo $t; }
busy() { awk '/^cpu /{print ($2+$3+$4+$7+$8)/100}' /proc/stat; }
rate() { awk -v a=$1 -v b=$2 -v t=$3 -v u=$4 'BEGIN{printf "%.2f", (b-a)/(u-t)}'; }
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
rpid=$!; pids=(); urls=()
for i in $(seq 0 $((NODES-1))); do
  RUST_LOG=warn target/release/waitroom --drain-s 0 --listen 127.0.0.1:$((PORT+i)) --admin-token TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT --secret S \
    --redis-url redis://127.0.0.1:$RPORT/ >/dev/null 2>&1 &
  pids+=($!); urls+=(http://127.0.0.1:$((PORT+i)))
done
for i in "${!pids[@]}"; do own ${pids[$i]} $((PORT+i)); done
for u in "${urls[@]}"; do until curl -sf $u/healthz >/dev/null; do sleep 0.2; done; done
curl -sf -X POST -H 'Authorization: Bearer TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT' -H 'Content-Type: application/json' \
  -d '{"id":"rb","name":"redis-benchmark","target_url":"/","paused":true,"abandon_after_s":86400}' \
  "${urls[0]}/api/admin/rooms" >/dev/null
sha=$( (cat lua/prelude.lua lua/lib.lua; echo; cat lua/join.lua) | redis-cli -p $RPORT -x SCRIPT LOAD)
rb() {
  local c0=$(cpu $rpid) t0=$(date +%s.%N) line
  # One join per call: a new visitor, no option (the visitor alone, as a
  # node sends it: Join::packed).
  line=$(redis-benchmark -p $RPORT -n $N -c $C -r 100000000000 --csv EVALSHA $sha 11 \
    'wr:{rb}:room' 'wr:{rb}:line' 'wr:{rb}:seen' 'wr:{rb}:visitors' 'wr:{rb}:active' 'wr:{rb}:admissions' \
    'wr:{rb}:arrivals' 'wr:{rb}:users' 'wr:{rb}:draw' 'wr:{rb}:entries' 'wr:{rb}:user-of' \
    PUBLISH "" 0000__rand_int__ | tail -1)
  echo "redis-benchmark: $line; redis-server $(rate $c0 $(cpu $rpid) $t0 $(date +%s.%N)) cores" >&2
  echo "$line" | cut -d, -f2 | tr -d '"'
}
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg); $(git log --oneline -1 | cut -c1-8); redis line: $(redis-cli -p $RPORT zcard 'wr:{rb}:line')" >&2
before=$(rb)
c0=$(cpu $rpid); t0=$(date +%s.%N)
target/release/waitroom-load --json join --url "$(IFS=,; echo "${urls[*]}")" --room bench \
  --admin-token TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT --create-room --concurrency $C --duration 10 \
  --server-pid "$(IFS=,; echo "${pids[*]}")" > $OUT/rj-$NODES-$C.json 2>$OUT/rj-$NODES-$C.log
joins=$(jq .join.per_s $OUT/rj-$NODES-$C.json)
echo "redis-server during the tool's joins: $(rate $c0 $(cpu $rpid) $t0 $(date +%s.%N)) cores" >&2
echo "joins (waitroom-load): $(jq -c '.join | {per_s, latency, errors}' $OUT/rj-$NODES-$C.json 2>/dev/null)" >&2
c0=$(cpu $rpid); n0=$(cpus "${pids[@]}"); m0=$(busy); t0=$(date +%s.%N); wrks=()
for i in $(seq 0 $((NODES-1))); do
  wrk -t1 -c$(( (C + i) / NODES )) -d10s --latency -s scripts/bench/join.lua \
    "${urls[$i]}/api/rooms/bench/join" > $OUT/rj-wrk-$NODES-$C-$i.log &
  wrks+=($!)
done
wait "${wrks[@]}"
t1=$(date +%s.%N)
echo "during wrk's joins: redis-server $(rate $c0 $(cpu $rpid) $t0 $t1), node(s) $(rate $n0 $(cpus "${pids[@]}") $t0 $t1), machine $(rate $m0 $(busy) $t0 $t1) cores busy" >&2
wrk_joins=$(cat $OUT/rj-wrk-$NODES-$C-*.log | awk '/Requests\/sec/{s+=$2} END{print s}')
grep -h '    99%\|Non-2xx\|Socket errors' $OUT/rj-wrk-$NODES-$C-*.log | sed 's/^ */wrk: /' >&2
after=$(rb)
for client in "waitroom-load $joins" "wrk $wrk_joins"; do
  set -- $client
  awk -v j=$2 -v b=$before -v a=$after 'BEGIN{printf "%d node(s), c=%d, %s: %.0f joins/s; redis-benchmark %.0f before, %.0f after; joins/s ÷ their mean = %.3f\n", '$NODES', '$C', "'$1'", j, b, a, 2*j/(a+b)}'
done
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)" >&2
kill "${pids[@]}" $rpid; wait
