#!/usr/bin/env bash
# Usage: scripts/bench/redis-join-stats.sh [C] (after cargo build --release).
# Where Redis's time goes when a node sends joins: one node, one Redis,
# wrk (C connections, default 256, 10 s after a 3 s warm-up) joining new
# visitors to a paused room's line; then Redis's INFO commandstats for
# those 10 s (how many joins each EVALSHA carried: HGET's calls ÷
# EVALSHA's, one HGET per join; the script's own time per call) and
# Redis's and the node's CPU time per join; then a SET's Redis CPU, on a
# fresh redis-server driven by redis-benchmark (64 connections, random
# keys), measured the same way. BIN: another build's binary. PIN=1 gives
# Redis a core of its own (taskset: redis-server on core 0; the node, wrk
# and redis-benchmark on core 1), as on a Redis host of its own, for the
# joins and the SET alike.
set -eu
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
C=${1:-256} RPORT=16430 PORT=18530 BIN=${BIN:-target/release/waitroom} LOG=${OUT:-/tmp}/join-stats-wrk.log
ulimit -n 20000
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
if [ "${PIN:-0}" = 1 ]; then on_redis_core="taskset -c 0" on_other_core="taskset -c 1"; else on_redis_core="" on_other_core=""; fi
$on_redis_core redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null 2>&1 &
rpid=$!
RUST_LOG=warn $on_other_core $BIN --drain-s 0 --listen 127.0.0.1:$PORT --admin-token TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT --secret S \
    --redis-url redis://127.0.0.1:$RPORT/ >/dev/null 2>&1 &
npid=$!
own $npid $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done
curl -sf -X POST -H 'Authorization: Bearer TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT' -H 'Content-Type: application/json' \
  -d '{"id":"bench","name":"b","target_url":"/","paused":true,"abandon_after_s":86400}' http://127.0.0.1:$PORT/api/admin/rooms >/dev/null
$on_other_core wrk -t1 -c$C -d3s -s scripts/bench/join.lua http://127.0.0.1:$PORT/api/rooms/bench/join >/dev/null
redis-cli -p $RPORT config resetstat >/dev/null
r0=$(cpu $rpid); n0=$(cpu $npid)
$on_other_core wrk -t1 -c$C -d10s --latency -s scripts/bench/join.lua http://127.0.0.1:$PORT/api/rooms/bench/join > $LOG
r1=$(cpu $rpid); n1=$(cpu $npid)
tot=$(awk '/requests in/{print $1}' $LOG)
grep -E "Requests/sec|    99%|Non-2xx" $LOG
stats=$(redis-cli -p $RPORT info commandstats | tr -d '\r')
echo "$stats" | grep -E "calls=" | sort -t= -k2 -rn | head -12
calls() { echo "$stats" | awk -F'[=,]' -v c="cmdstat_$1:" 'index($0, c) == 1 {print $2, $6}'; }
read evals per_eval <<<"$(calls evalsha)"; read hgets _ <<<"$(calls hget)"
awk -v e=$evals -v p=$per_eval -v h=$hgets 'BEGIN{printf "%.1f joins per EVALSHA; the script itself %.2f µs per join\n", h/e, p*e/h}'
awk -v a=$r0 -v b=$r1 -v c=$n0 -v d=$n1 -v t=$tot 'BEGIN{printf "%d joins; CPU per join: Redis %.2f µs, the node %.2f µs\n", t, (b-a)*1e6/t, (d-c)*1e6/t}'
kill $npid $rpid; wait 2>/dev/null || true
$on_redis_core redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null 2>&1 &
rpid=$!
until redis-cli -p $RPORT ping >/dev/null 2>&1; do sleep 0.1; done
r0=$(cpu $rpid)
$on_other_core redis-benchmark -p $RPORT -n 300000 -c 64 -r 100000000000 -q SET key:__rand_int__ v >/dev/null
awk -v a=$r0 -v b=$(cpu $rpid) 'BEGIN{printf "SET: %.2f µs of Redis CPU per SET\n", (b-a)*1e6/300000}'
kill $rpid; wait 2>/dev/null || true
