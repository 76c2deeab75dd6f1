#!/usr/bin/env bash
# Usage: scripts/bench/verify.sh TAG [BIN...] (after cargo build --release).
# /api/verify as nginx's auth_request asks it, on every request to the
# protected site: one node (memory store) per binary given (default
# target/release/waitroom), each checking one valid pass, wrk with 64
# connections for 5 s, twice per binary, the binaries taking turns. Prints
# verifies/s, p99 and the node's CPU time per verify (its CPU over the
# run ÷ the run's verifies). Writes $OUT/TAG-verify-ROUND-N.log (N: the
# binary's place in the list, from 0).
set -eu
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
TAG=$1; shift
BINS=("${@:-target/release/waitroom}")
PORT=18740 OUT=${OUT:-/tmp/rows} T=bench-admin-token-0123456789abcdef URL=http://127.0.0.1:18740
mkdir -p "$OUT"
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
for round in 1 2; do
  for i in "${!BINS[@]}"; do
    bin=${BINS[$i]}
    RUST_LOG=warn WAITROOM_ADMIN_TOKEN=$T "$bin" --drain-s 0 --listen 127.0.0.1:$PORT --secret S >/dev/null 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    own $pid $PORT
    until curl -sf $URL/healthz >/dev/null; do sleep 0.1; done
    curl -sf -X POST -H "Authorization: Bearer $T" -H 'Content-Type: application/json' \
      -d '{"id":"open","name":"Open","target_url":"/","queue_method":"passthrough","pass_ttl_s":3600}' \
      $URL/api/admin/rooms >/dev/null
    pass=$(curl -sf -X POST $URL/api/rooms/open/join | sed -E 's/.*"pass":"([^"]+)".*/\1/')
    test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $pass" "$URL/api/verify?room=open")" = 204
    log=$OUT/$TAG-verify-$round-$i.log
    c0=$(cpu $pid)
    wrk -t1 -c64 -d5s --latency -H "Authorization: Bearer $pass" "$URL/api/verify?room=open" > "$log"
    c1=$(cpu $pid)
    n=$(awk '/requests in/{print $1}' "$log")
    grep -q "Non-2xx" "$log" && { echo "$bin: answers other than 204"; exit 1; }
    awk -v a=$c0 -v b=$c1 -v n=$n -v bin="$bin" '/Requests\/sec/{r=$2} /^ +99%/{p=$2}
      END{printf "%s: %s verifies/s, p99 %s, node CPU %.2f µs per verify\n", bin, r, p, (b-a)*1e6/n}' "$log"
    kill $pid; wait $pid 2>/dev/null || true
  done
done
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
