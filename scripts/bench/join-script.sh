#!/usr/bin/env bash
# Usage: scripts/bench/join-script.sh BEFORE [ROUNDS] (after cargo build --release).
# Redis CPU per join, the join script alone (no node): the script as it is
# in BEFORE (a git revision) and as it is in the working tree, loaded into
# one redis-server, each run by redis-benchmark (64 connections, a new
# visitor per call, joining a paused room's line), alternating before,
# after, after, before for ROUNDS rounds (default 2), with a SET run (the
# same redis-benchmark, random keys) first and last for the ratio the
# issue asks for: Redis CPU per join ÷ Redis CPU per SET, measured alike as
# redis-server's CPU time over the calls it served.
set -eu
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
BEFORE=$1 ROUNDS=${2:-2} RPORT=16410 PORT=18510 N=${N:-200000} C=64
T=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
rpid=$!
RUST_LOG=warn target/release/waitroom --drain-s 0 --listen 127.0.0.1:$PORT --admin-token $T --secret S \
  --redis-url redis://127.0.0.1:$RPORT/ >/dev/null 2>&1 &
node=$!
own $node $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done
for room in before after; do
  curl -sf -X POST -H "Authorization: Bearer $T" -H 'Content-Type: application/json' \
    -d '{"id":"'$room'","name":"'$room'","target_url":"/","paused":true,"abandon_after_s":86400}' \
    http://127.0.0.1:$PORT/api/admin/rooms >/dev/null
done
# The node's promoter would tick the rooms now and then: measure Redis alone.
kill $node; wait $node || true
sha_before=$( (git show $BEFORE:lua/prelude.lua; git show $BEFORE:lua/lib.lua; echo; git show $BEFORE:lua/join.lua) \
  | redis-cli -p $RPORT -x SCRIPT LOAD)
sha_after=$( (cat lua/prelude.lua lua/lib.lua; echo; cat lua/join.lua) | redis-cli -p $RPORT -x SCRIPT LOAD)
# Redis CPU µs per call of one redis-benchmark run, and its calls/s.
measure() {
  local c0=$(cpu $rpid) line
  line=$(redis-benchmark -p $RPORT -n $N -c $C -r 100000000000 --csv "$@" | tail -1)
  awk -v a=$c0 -v b=$(cpu $rpid) -v n=$N -v l="$line" \
    'BEGIN{split(l, f, "\""); printf "%.2f µs of Redis CPU per call, %s calls/s", (b-a)*1e6/n, f[4]}'
}
# One join per call, in the layout of the script at hand: ten values and two
# declared keys before 1d317ed, one argument of newline-ended fields since
# (as many as that version's JOIN_FIELDS: 12, then 13 with the code guesses).
join() {
  local room=$1 sha=$2 packed=$3
  local keys=("wr:{$room}:room" "wr:{$room}:line" "wr:{$room}:seen" "wr:{$room}:visitors" "wr:{$room}:active"
    "wr:{$room}:admissions" "wr:{$room}:arrivals" "wr:{$room}:users" "wr:{$room}:draw" "wr:{$room}:entries"
    "wr:{$room}:user-of")
  if [ "$packed" != no ]; then
    local arg=0000__rand_int__
    for _ in $(seq 2 $packed); do arg+=$'\n'; done
    measure EVALSHA $sha 11 "${keys[@]}" PUBLISH "" "$arg"
  else
    measure EVALSHA $sha 13 "${keys[@]}" "wr:{$room}:join-limit:" "wr:{$room}:pow:" \
      PUBLISH "" 0000__rand_int__ "" "" "" "" "" "" "" "" ""
  fi
}
# "no" for the layout of values, or the number of fields a packed join has.
layout() {
  local join=$1 prelude=$2 fields
  # Since the join's values are declared once (join_values!), the prelude
  # reads them: a join without options is its visitor alone, as the node
  # sends it.
  if $prelude | grep -q JOIN_PATTERN; then echo 1; return; fi
  if ! $join | grep -q JOIN_PATTERN; then echo no; return; fi
  fields=$($prelude | sed -n 's/^local JOIN_FIELDS = //p')
  echo ${fields:-12}
}
packed_before=$(layout "git show $BEFORE:lua/join.lua" "git show $BEFORE:lua/prelude.lua")
packed_after=$(layout "cat lua/join.lua" "cat lua/prelude.lua")
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg); before $(git rev-parse --short $BEFORE), after: the working tree on $(git rev-parse --short HEAD)"
echo "SET: $(measure SET key:__rand_int__ value)"
for round in $(seq 1 $ROUNDS); do
  echo "round $round, before: $(join before $sha_before $packed_before)"
  echo "round $round, after: $(join after $sha_after $packed_after)"
  echo "round $round, after: $(join after $sha_after $packed_after)"
  echo "round $round, before: $(join before $sha_before $packed_before)"
done
echo "SET: $(measure SET key:__rand_int__ value)"
echo "line lengths: before $(redis-cli -p $RPORT zcard 'wr:{before}:line'), after $(redis-cli -p $RPORT zcard 'wr:{after}:line')"
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
kill $rpid; wait $rpid || true
