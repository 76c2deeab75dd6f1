#!/usr/bin/env bash
# Usage: scripts/bench/admitted-join.sh TAG [CHECKOUT]
# Issue 26, item 3: node CPU per join that is admitted at once (a room with
# `queue_method: passthrough`: every join signs a pass) against one that
# waits (a paused room), on one node with the memory store, the two phases
# alternating twice in the same minutes; then `perf` samples the node
# through one more admitted phase, for where its time goes.
# Writes $OUT/TAG-{wait,admit}-N.json (waitroom-load's figures, the server's
# CPU per join among them) and $OUT/TAG-admit.perf.txt (the profile).
set -eu
. "$(dirname "$0")/own.sh"
TAG=$1 DIR=${2:-.} PORT=18710 OUT=${OUT:-/tmp/rows}
mkdir -p "$OUT"
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
TOOL=${TOOL:-target/release/waitroom-load}
URL=http://127.0.0.1:$PORT
WAITROOM_ADMIN_TOKEN=$T "$DIR/target/release/waitroom" --drain-s 0 --listen 127.0.0.1:$PORT \
  > "$OUT/$TAG-admitted-join.server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
own $pid $PORT
until curl -sf $URL/healthz >/dev/null; do sleep 0.2; done; sleep 1
curl -sf -X POST -H "Authorization: Bearer $T" -H 'Content-Type: application/json' \
  -d '{"id":"open","name":"Open","target_url":"/","queue_method":"passthrough","pass_ttl_s":60}' \
  $URL/api/admin/rooms > /dev/null
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg)" > "$OUT/$TAG-admitted-join.log"
phase() { # ROOM NAME [extra flags]
  local room=$1 name=$2; shift 2
  $TOOL --json join --url $URL --room "$room" --admin-token $T --concurrency 64 \
    --server-pid $pid --duration 5 "$@" > "$OUT/$TAG-$name.json" 2>> "$OUT/$TAG-admitted-join.log"
}
phase wait wait-1 --create-room
phase open admit-1
phase wait wait-2
phase open admit-2
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)" >> "$OUT/$TAG-admitted-join.log"
perf record -F 999 -g -p $pid -o "$OUT/$TAG-admit.perf.data" -- sleep 6 2>> "$OUT/$TAG-admitted-join.log" &
perf_pid=$!
sleep 0.5
phase open admit-perf
wait $perf_pid || true
perf report -i "$OUT/$TAG-admit.perf.data" --stdio --no-children --sort dso,symbol \
  --percent-limit 0.8 2>/dev/null > "$OUT/$TAG-admit.perf.txt" || true
