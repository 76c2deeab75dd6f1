#!/usr/bin/env bash
# Usage: scripts/bench/script-floor.sh [ROUNDS]
# What any join script costs Redis before it does anything, against a SET:
# redis-server's CPU time per call of redis-benchmark (64 connections) for
# SET; for EVALSHA of a script that returns at once, with the join's 13
# keys and 12 arguments; for the same after the prelude and lib.lua every
# room script carries (their top-level chunk runs at every call); and for
# a script that reads a 34-field hash (a new room's, which branding and limits make longer) into a table, as
# load_room() does.
set -eu
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2} RPORT=16411 N=${N:-200000}
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
rpid=$!
until redis-cli -p $RPORT ping >/dev/null 2>&1; do sleep 0.1; done
bare=$(echo "return 1" | redis-cli -p $RPORT -x SCRIPT LOAD)
lib=$( (cat lua/prelude.lua lua/lib.lua; echo; echo "return 1") | redis-cli -p $RPORT -x SCRIPT LOAD)
room=$(echo "local flat = redis.call('HGETALL', KEYS[1]); local r = {}; for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end; return 1" \
  | redis-cli -p $RPORT -x SCRIPT LOAD)
redis-cli -p $RPORT hset 'wr:{x}:room' $(for i in $(seq 1 34); do echo "field$i value$i"; done) >/dev/null
per_call() {
  local c0=$(cpu $rpid)
  redis-benchmark -p $RPORT -n $N -c 64 -r 100000000000 --csv "$@" >/dev/null
  awk -v a=$c0 -v b=$(cpu $rpid) -v n=$N 'BEGIN{printf "%.2f µs of Redis CPU per call", (b-a)*1e6/n}'
}
keys() { for k in room line seen visitors active admissions arrivals users draw entries user-of join-limit: pow:; do echo "wr:{x}:$k"; done; }
script() { per_call EVALSHA $1 13 $(keys) PUBLISH "" 0000__rand_int__ "" "" "" "" "" "" "" "" ""; }
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
for round in $(seq 1 $ROUNDS); do
  echo "SET: $(per_call SET key:__rand_int__ value)"
  echo "EVALSHA of 'return 1': $(script $bare)"
  echo "EVALSHA of the prelude and lib.lua, then 'return 1': $(script $lib)"
  echo "EVALSHA reading a 34-field hash into a table: $(script $room)"
done
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
kill $rpid; wait $rpid || true
