#!/usr/bin/env bash
# Usage: scripts/bench/verify-sessions.sh TAG [ROUNDS] (after cargo build --release).
# Issue 44, item 2: what sessions cost /api/verify. One node on a private
# redis-server (free ports), and per variant two passthrough rooms alike
# but for sessions: plain-VARIANT (pass_ttl_s 3600) and sessions-VARIANT
# (the same and session_idle_s IDLE, default 60). wrk (64 connections, 5 s
# a run) verifies passes of one room, then the other: plain, sessions,
# sessions, plain for ROUNDS rounds (default 2), so both are measured in
# the same minutes. The variants:
#   one:  one pass per room, hammered: a renewal writes at most once a
#         tenth of the idle time per pass (6 s), so these are reads;
#   many: PASSES passes per room (default 1000), another on every request
#         (scripts/bench/verify-passes.lua), so that each is renewed as
#         often as the rule writes. IDLE=20 PASSES=20000 makes most
#         calls writes (each pass called about every 2 s at 10,000
#         verifies/s, written once 2 s have passed; a shorter idle time
#         would let the sessions lapse between their runs).
# Per run: verifies/s, p99, node CPU and redis-server CPU per verify (each
# process's CPU time over the run ÷ the run's verifies, from /proc), the
# EVALSHA time per verify (Redis's own commandstats: the scripts alone) and
# the renewals written (the ZADDs inside the scripts: nothing else in these
# runs makes one). Then per variant sessions ÷ plain of each figure's
# median. BIN: the node (default target/release/waitroom). Writes
# $OUT/TAG-vs-VARIANT-N-ROOM.log (wrk's output) and the passes.
set -eu
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
TAG=$1 ROUNDS=${2:-2} PASSES=${PASSES:-1000} IDLE=${IDLE:-60} BIN=${BIN:-target/release/waitroom}
OUT=${OUT:-/tmp} T=bench-admin-token-0123456789abcdef
mkdir -p "$OUT"
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
# A port nothing listens on (the server started on it is then checked to
# be ours by `own`).
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    ss -ltnH "sport = :$port" | grep -q . || { echo $port; return; }
  done
}
RPORT=$(free_port) PORT=$(free_port)
until [ $PORT != $RPORT ]; do PORT=$(free_port); done
URL=http://127.0.0.1:$PORT
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
# A field of `INFO commandstats`'s line for a command (calls or usec), 0 if none ran.
cmdstat() {
  redis-cli -p $RPORT INFO commandstats | tr -d '\r' |
    awk -F'[:,=]' -v c="cmdstat_$1" -v f="$2" '$1 == c { for (i = 2; i < NF; i += 2) if ($i == f) v = $(i + 1) } END { print v + 0 }'
}
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
rpid=$! pid=
trap 'kill $rpid $pid 2>/dev/null || true' EXIT
own $rpid $RPORT
RUST_LOG=warn WAITROOM_ADMIN_TOKEN=$T "$BIN" --drain-s 0 --listen 127.0.0.1:$PORT --secret S \
  --redis-url redis://127.0.0.1:$RPORT/ >/dev/null 2>&1 &
pid=$!
own $pid $PORT
until curl -sf $URL/healthz >/dev/null; do sleep 0.1; done
# A variant's two rooms (plain-VARIANT, sessions-VARIANT), made right
# before its runs, with COUNT visitors admitted to each, their passes one a
# line in $OUT/TAG-vs-ROOM.passes: no pass made for one variant is left to
# lapse, and be swept, during the other's.
rooms() {
  local variant=$1 count=$2 room idle
  for room in plain-$variant sessions-$variant; do
    idle=null
    [ $room = sessions-$variant ] && idle=$IDLE
    curl -sf -X POST -H "Authorization: Bearer $T" -H 'Content-Type: application/json' \
      -d '{"id":"'$room'","name":"'$room'","target_url":"/","queue_method":"passthrough","pass_ttl_s":3600,"session_idle_s":'$idle'}' \
      $URL/api/admin/rooms >/dev/null
    # Four curls, each making its share of the joins over one kept-alive
    # connection: quick enough that no session lapses before the last
    # pass is made (a curl a join would take a minute for 20,000). The
    # bodies follow each other: each pass is found where it is.
    local share=$(((count + 3) / 4)) i n joiners=()
    for i in 0 1 2 3; do
      n=$((count - i * share < share ? count - i * share : share))
      [ $n -gt 0 ] || continue
      yes "url = \"$URL/api/rooms/$room/join\"" | head -n $n > "$OUT/$TAG-vs-$room.curl$i"
      curl -s -X POST -K "$OUT/$TAG-vs-$room.curl$i" > "$OUT/$TAG-vs-$room.joins$i" &
      joiners+=($!)
    done
    wait "${joiners[@]}"
    cat "$OUT/$TAG-vs-$room".joins? | grep -o '"pass":"[^"]*"' | cut -d'"' -f4 > "$OUT/$TAG-vs-$room.passes"
    rm "$OUT/$TAG-vs-$room".curl? "$OUT/$TAG-vs-$room".joins?
    test "$(wc -l < "$OUT/$TAG-vs-$room.passes")" = $count
    local pass=$(head -1 "$OUT/$TAG-vs-$room.passes")
    test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $pass" "$URL/api/verify?room=$room")" = 204
  done
}
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg); $(git log --oneline -1 | cut -c1-8), $BIN; session_idle_s $IDLE, $PASSES passes per room for 'many'"
results=$OUT/$TAG-vs.results
: > "$results"
run() {
  local variant=$1 n=$2 room=$3-$1 log=$OUT/$TAG-vs-$1-$2-$3.log
  local how=(-H "Authorization: Bearer $(head -1 "$OUT/$TAG-vs-$room.passes")")
  [ $variant = many ] && how=(-s scripts/bench/verify-passes.lua)
  local c0 r0 e0 u0 z0
  c0=$(cpu $pid) r0=$(cpu $rpid) e0=$(cmdstat evalsha calls) u0=$(cmdstat evalsha usec) z0=$(cmdstat zadd calls)
  wrk -t1 -c64 -d5s --latency "${how[@]}" "$URL/api/verify?room=$room" -- "$OUT/$TAG-vs-$room.passes" > "$log"
  local c1 r1 e1 u1 z1
  c1=$(cpu $pid) r1=$(cpu $rpid) e1=$(cmdstat evalsha calls) u1=$(cmdstat evalsha usec) z1=$(cmdstat zadd calls)
  ! grep -q "Non-2xx" "$log" || { echo "$room: answers other than 204 (see $log)"; exit 1; }
  awk -v v=$variant -v n=$n -v room=$room -v c0=$c0 -v c1=$c1 -v r0=$r0 -v r1=$r1 \
    -v e=$((e1 - e0)) -v u=$((u1 - u0)) -v z=$((z1 - z0)) -v l="$(cut -d' ' -f1 /proc/loadavg)" '
    /requests in/ { k = $1 } /Requests\/sec/ { s = $2 } /^ +99%/ { p = $2 }
    END {
      c = c1 - c0; r = r1 - r0
      printf "%s %d %s: %.0f verifies/s, p99 %s; node %.2f µs, Redis %.2f µs of CPU per verify; EVALSHA %.2f µs per verify (%d scripts); %d renewals written (load %s)\n",
        v, n, room, s, p, c * 1e6 / k, r * 1e6 / k, u / k, e, z, l
      printf "%s %s %f %f %f\n", v, substr(room, 1, index(room, "-") - 1), c * 1e6 / k, r * 1e6 / k, u / k >> "'"$results"'"
    }' "$log"
}
for variant in one many; do
  if [ $variant = one ]; then rooms one 1; else rooms many $PASSES; fi
  n=0
  for round in $(seq $ROUNDS); do
    for room in plain sessions sessions plain; do
      n=$((n + 1))
      run $variant $n $room
    done
  done
done
# Sessions ÷ plain, of each figure's median over the runs of its variant.
for variant in one many; do
  awk -v v=$variant '
    function median(a, n,   i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $1 == v { k = $2; n[k]++; node[k, n[k]] = $3; redis[k, n[k]] = $4; script[k, n[k]] = $5 }
    END {
      for (f = 1; f <= 3; f++) for (k in n) {
        for (i = 1; i <= n[k]; i++) a[i] = f == 1 ? node[k, i] : f == 2 ? redis[k, i] : script[k, i]
        m[f, k] = median(a, n[k])
      }
      printf "%s: sessions ÷ plain, medians: node CPU %.2f ÷ %.2f µs = %.2f×; Redis CPU %.2f ÷ %.2f µs = %.2f×; EVALSHA %.2f ÷ %.2f µs = %.2f×\n",
        v, m[1, "sessions"], m[1, "plain"], m[1, "sessions"] / m[1, "plain"],
        m[2, "sessions"], m[2, "plain"], m[2, "sessions"] / m[2, "plain"],
        m[3, "sessions"], m[3, "plain"], m[3, "sessions"] / m[3, "plain"]
    }' "$results"
done
for variant in one many; do
  echo "sessions-$variant: $(curl -sf -H "Authorization: Bearer $T" $URL/api/admin/rooms/sessions-$variant |
    sed -E 's/.*"sessions_lapsed":([0-9]+).*/\1/') sessions lapsed"
done
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
