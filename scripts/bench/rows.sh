#!/usr/bin/env bash
# Usage: scripts/bench/rows.sh TAG CHECKOUT KIND  (KIND: sockets, joins or redis)
# One run of BENCHMARKS.md's sockets or joins row (memory store), or of
# scripts/bench/redis-join.sh 1 64, against CHECKOUT's release build.
set -eu
. "$(dirname "$0")/own.sh"
TAG=$1 DIR=$2 KIND=$3 PORT=18700 OUT=${OUT:-/tmp/rows}
mkdir -p $OUT
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
TOOL=${TOOL:-target/release/waitroom-load}   # one tool binary for every run
case $KIND in
redis)
  (cd $DIR && OUT=$OUT scripts/bench/redis-join.sh 1 64) > $OUT/$TAG-redis.out 2> $OUT/$TAG-redis.err
  exit 0;;
esac
WAITROOM_ADMIN_TOKEN=$T $DIR/target/release/waitroom --drain-s 0 --listen 127.0.0.1:$PORT > $OUT/$TAG-$KIND.server.log 2>&1 &
pid=$!
own $pid $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done; sleep 1
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg)" > $OUT/$TAG-$KIND.log
case $KIND in
sockets)
  $TOOL --json sockets --url http://127.0.0.1:$PORT --room sockets-10000 --admin-token $T \
    --sockets 10000 --source-ips 2 --hold 20 --server-pid $pid > $OUT/$TAG-$KIND.json 2>> $OUT/$TAG-$KIND.log;;
joins)
  $TOOL --json join --url http://127.0.0.1:$PORT --room bench-c64 --admin-token $T \
    --create-room --concurrency 64 --path-baseline /healthz --server-pid $pid \
    --rounds 3 --duration 5 > $OUT/$TAG-$KIND.json 2>> $OUT/$TAG-$KIND.log;;
esac
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)" >> $OUT/$TAG-$KIND.log
kill $pid; wait $pid || true
