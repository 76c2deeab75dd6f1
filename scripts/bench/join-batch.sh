#!/usr/bin/env bash
# Usage: scripts/bench/join-batch.sh [SIZES] (after cargo build --release).
# Redis CPU per join when a node sends a room's joins together (see
# src/store/redis/join_batch.rs): the join script (the working tree's) run
# by redis-benchmark (64 connections) with SIZES joins per call (default
# "1 8 64"; each a new visitor joining a paused room's line), between two
# SET runs (the same redis-benchmark, random keys) for the ratio the issue
# asks for: Redis CPU per join ÷ Redis CPU per SET, both measured as
# redis-server's CPU time over what it served.
set -eu
cd "$(dirname "$0")/../.."
SIZES=${1:-"1 8 64"} RPORT=16420 PORT=18520 N=${N:-200000} C=64
T=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT
# One join's argument: a new visitor, no option (11 empty fields after it).
JOIN=$'0000__rand_int__\n\n\n\n\n\n\n\n\n\n\n'
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
rpid=$!
RUST_LOG=warn target/release/waitroom --drain-s 0 --listen 127.0.0.1:$PORT --admin-token $T --secret S \
  --redis-url redis://127.0.0.1:$RPORT/ >/dev/null 2>&1 &
node=$!
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done
curl -sf -X POST -H "Authorization: Bearer $T" -H 'Content-Type: application/json' \
  -d '{"id":"b","name":"b","target_url":"/","paused":true,"abandon_after_s":86400}' \
  http://127.0.0.1:$PORT/api/admin/rooms >/dev/null
# The node's promoter would tick the room now and then: measure Redis alone.
kill $node; wait $node || true
sha=$( (cat lua/prelude.lua lua/lib.lua; echo; cat lua/join.lua) | redis-cli -p $RPORT -x SCRIPT LOAD)
# Redis CPU µs per call of one redis-benchmark run of N/PER calls ($1 = PER
# joins each), per join, and joins/s (over the run's wall time).
measure() {
  local per=$1; shift
  local calls=$((N / per)) c0=$(cpu $rpid) t0=$(date +%s.%N)
  redis-benchmark -p $RPORT -n $calls -c $C -r 100000000000 -q "$@" >/dev/null
  awk -v a=$c0 -v b=$(cpu $rpid) -v n=$calls -v per=$per -v t0=$t0 -v t1=$(date +%s.%N) \
    'BEGIN{printf "%.2f µs of Redis CPU per call, %.2f per join, %.0f joins/s", (b-a)*1e6/n, (b-a)*1e6/(n*per), n*per/(t1-t0)}'
}
joins() {
  local per=$1 keys=() fields=()
  keys=("wr:{b}:room" "wr:{b}:line" "wr:{b}:seen" "wr:{b}:visitors" "wr:{b}:active" "wr:{b}:admissions"
    "wr:{b}:arrivals" "wr:{b}:users" "wr:{b}:draw" "wr:{b}:entries" "wr:{b}:user-of")
  for _ in $(seq 1 $per); do
    fields+=("$JOIN")
  done
  measure $per EVALSHA $sha ${#keys[@]} "${keys[@]}" PUBLISH "" "${fields[@]}"
}
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg); the working tree on $(git rev-parse --short HEAD)"
echo "SET: $(measure 1 SET key:__rand_int__ value)"
for per in $SIZES; do echo "$per per call: $(joins $per)"; done
for per in $(echo $SIZES | tr ' ' '\n' | tac); do echo "$per per call: $(joins $per)"; done
echo "SET: $(measure 1 SET key:__rand_int__ value)"
echo "line length: $(redis-cli -p $RPORT zcard 'wr:{b}:line')"
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
kill $rpid; wait $rpid || true
