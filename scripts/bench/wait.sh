#!/usr/bin/env bash
# Usage: scripts/bench/wait.sh [ROUNDS] (after cargo build --release --workspace).
# What --redis-wait-replicas costs: one node on a Redis master with one
# replica (both local, no persistence), joins/s (10 s, C = 64, the page's
# body, a paused room so every join writes) and claims/s (5,000 visitors,
# one claim each, C = 64) with --redis-wait-replicas 0 and 1, alternating
# ROUNDS times (default 3) so drift falls on both alike. Each phase also
# prints the machine's busy cores (of 2): the limit both settings share.
# Figures to stderr; the tool's JSON to $OUT (default /tmp).
set -eu
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
ROUNDS=${1:-3} MPORT=16410 RPORT=16411 PORT=18510
TOKEN=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT
ulimit -n 20000
busy() { awk '/^cpu /{print ($2+$3+$4+$7+$8)/100}' /proc/stat; }
rate() { awk -v a=$1 -v b=$2 -v t=$3 -v u=$4 'BEGIN{printf "%.2f", (b-a)/(u-t)}'; }
for port in $MPORT $RPORT $PORT; do
  ! (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null || { echo "port $port is taken" >&2; exit 1; }
done
redis-server --port $MPORT --bind 127.0.0.1 --save "" --appendonly no --repl-diskless-sync-delay 0 >/dev/null &
mpid=$!
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --replicaof 127.0.0.1 $MPORT >/dev/null &
rpid=$!
node=
trap 'kill $mpid $rpid $node 2>/dev/null' EXIT
for _ in $(seq 100); do
  redis-cli -p $MPORT info replication 2>/dev/null | grep -q state=online && break
  sleep 0.2
done
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg); $(git log --oneline -1 | cut -c1-8)" >&2
for round in $(seq 1 $ROUNDS); do
  for wait in 0 1; do
    redis-cli -p $MPORT flushall >/dev/null
    RUST_LOG=warn target/release/waitroom --listen 127.0.0.1:$PORT --admin-token $TOKEN --secret S \
      --drain-s 0 --redis-url redis://127.0.0.1:$MPORT/ --redis-wait-replicas $wait >/dev/null 2>&1 &
    node=$!
    for _ in $(seq 100); do curl -sf http://127.0.0.1:$PORT/healthz >/dev/null && break; sleep 0.2; done
    m0=$(busy); t0=$(date +%s.%N)
    target/release/waitroom-load --json join --url http://127.0.0.1:$PORT --room joins \
      --admin-token $TOKEN --create-room --concurrency 64 --duration 10 --server-pid $node \
      > $OUT/wait-$wait-$round-join.json 2>/dev/null
    join_busy=$(rate $m0 $(busy) $t0 $(date +%s.%N))
    m0=$(busy); t0=$(date +%s.%N)
    target/release/waitroom-load --json claims --url http://127.0.0.1:$PORT --room claims \
      --admin-token $TOKEN --visitors 5000 --concurrency 64 --server-pid $node \
      > $OUT/wait-$wait-$round-claims.json 2>/dev/null
    claim_busy=$(rate $m0 $(busy) $t0 $(date +%s.%N))
    echo "round $round, --redis-wait-replicas $wait: joins $(jq -c '.join | {per_s, p50_ms: .latency.p50_ms, p99_ms: .latency.p99_ms, errors}' $OUT/wait-$wait-$round-join.json) machine $join_busy cores busy; claims $(jq -c '{per_s, p50_ms: .latency.p50_ms, p99_ms: .latency.p99_ms, created, refused, errors, check_passed}' $OUT/wait-$wait-$round-claims.json) machine $claim_busy cores busy" >&2
    kill $node; wait $node 2>/dev/null || true
  done
done
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)" >&2
