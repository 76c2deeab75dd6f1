#!/usr/bin/env bash
# Usage: scripts/bench/joins-callgrind.sh CHECKOUT TAG
# Instructions the node executes per join, whatever the machine is doing:
# CHECKOUT's release build under callgrind (memory store), 300 joins to warm
# it, then 2,000 joins one at a time with instrumentation on (a paused room,
# each a new place). Prints the total; ÷ 2,000 is the cost of a join.
set -eu
. "$(dirname "$0")/own.sh"
DIR=$1 TAG=$2 PORT=18811 OUT=${OUT:-/tmp}
T=bench-admin-token-0123456789abcdef
WAITROOM_ADMIN_TOKEN=$T valgrind --tool=callgrind --callgrind-out-file=$OUT/cg-$TAG.out \
  --instr-atstart=no $DIR/target/release/waitroom --drain-s 0 --listen 127.0.0.1:$PORT \
  > $OUT/cg-$TAG.log 2>&1 &
pid=$!
own $pid $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done
curl -sf -X POST -H "Authorization: Bearer $T" -H 'content-type: application/json' \
  -d '{"id":"cg","name":"CG","target_url":"/x","paused":true}' \
  http://127.0.0.1:$PORT/api/admin/rooms >/dev/null
joins() {
  python3 -c "
import http.client
c = http.client.HTTPConnection('127.0.0.1', $PORT)
for _ in range($1):
    c.request('POST', '/api/rooms/cg/join', body='{}', headers={'content-type': 'application/json'})
    c.getresponse().read()
"
}
joins 300
callgrind_control -i on $pid >/dev/null
joins 2000
callgrind_control -i off $pid >/dev/null
kill $pid; wait $pid || true
callgrind_annotate $OUT/cg-$TAG.out | grep 'PROGRAM TOTALS'
