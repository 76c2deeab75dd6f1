#!/usr/bin/env bash
# Usage: scripts/bench/join-batch.sh [SIZES] (after cargo build --release).
# With FEATURES=1, then each feature's join at 64 per call on a room of its
# own: the per-address limit, proof of work, a priority code.
# Redis CPU per join when a node sends a room's joins together (see
# src/store/redis/join_batch.rs): the join script (the working tree's) run
# by redis-benchmark (64 connections; CLIENTS=N for N) with SIZES joins per call (default
# "1 8 64"; each a new visitor joining a paused room's line), between two
# SET runs (the same redis-benchmark, random keys) for the ratio the issue
# asks for: Redis CPU per join ÷ Redis CPU per SET, both measured as
# redis-server's CPU time over what it served. With PACE="R…", then 64
# joins per call sent at R calls a second (N joins each run) by a client
# that waits between calls, so that Redis sleeps between them as it does
# behind a node (Python's redis-py, installed if missing). PIN=1 gives
# Redis a core of its own (core 0; the clients on core 1). Last, Redis's
# data (used_memory_dataset) per place in the line (without FEATURES: the
# one room's line is then all there is).
set -eu
. "$(dirname "$0")/own.sh"
cd "$(dirname "$0")/../.."
SIZES=${1:-"1 8 64"} RPORT=16420 PORT=18520 N=${N:-200000} C=${CLIENTS:-64}
T=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT
# One join's argument: a visitor the node made for this join, no option
# (the visitor and '1', fresh, on two lines, as a node sends it; the
# visitor alone, as the builds before join-cost sent any join without
# options, when FRESH=0; the 12-field form of the builds before 2026-11-27
# when PACKED=1).
JOIN=$'0000__rand_int__\n1'
[ "${FRESH:-1}" = 0 ] && JOIN=0000__rand_int__
[ -n "${PACKED:-}" ] && JOIN=$'0000__rand_int__\n\n\n\n\n\n\n\n\n\n\n'
# ADDRESS=1: with the client's address, as a node sends a join without
# options (the visitor, fresh and the address on three lines).
[ -n "${ADDRESS:-}" ] && JOIN=$'0000__rand_int__\n1\n4:7f000001'
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
if [ "${PIN:-0}" = 1 ]; then on_redis_core="taskset -c 0" on_other_core="taskset -c 1"; else on_redis_core="" on_other_core=""; fi
[ -z "${PACE:-}" ] || python3 -c 'import redis' 2>/dev/null || pip install -q redis >/dev/null
$on_redis_core redis-server --port $RPORT --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null &
rpid=$!
RUST_LOG=warn target/release/waitroom --drain-s 0 --listen 127.0.0.1:$PORT --admin-token $T --secret S \
  --redis-url redis://127.0.0.1:$RPORT/ >/dev/null 2>&1 &
node=$!
own $node $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done
admin() {
  curl -sf -X POST -H "Authorization: Bearer $T" -H 'Content-Type: application/json' -d "$2" \
    http://127.0.0.1:$PORT/api/admin/$1 >/dev/null
}
for room in b limit; do
  admin rooms '{"id":"'$room'","name":"b","target_url":"/","paused":true,"abandon_after_s":86400}'
done
admin rooms '{"id":"pow","name":"b","target_url":"/","paused":true,"abandon_after_s":86400,"pow_difficulty":1}'
admin rooms '{"id":"code","name":"b","target_url":"/","paused":true,"abandon_after_s":86400}'
CODE=bench-code-0123456789
admin rooms/code/codes '{"group":"bench","priority":1,"uses":1000000000,"codes":["'$CODE'"]}'
CODE_HASH=$(printf %s $CODE | sha256sum | cut -d' ' -f1)
# The node's promoter would tick the room now and then: measure Redis alone.
kill $node; wait $node || true
# The script as the node makes it (src/store/redis/prelude.rs, room_script):
# the operation runs as a function of its own, or the main chunk would hold
# more locals than Lua allows.
sha=$( (cat lua/prelude.lua lua/lib.lua; printf '\nlocal function operation()\n'; cat lua/join.lua
  printf '\nend\nlocal reply = operation()\n'
  printf "if PUBLISH ~= '' or (type(reply) == 'table' and reply.err) then return reply end\n"
  printf 'if reply == nil then reply = false end\nreturn { reply, DEFERRED }\n') \
  | redis-cli -p $RPORT -x SCRIPT LOAD)
case $sha in *ERR*) echo "the join script does not load: $sha" >&2; exit 1 ;; esac
# Redis CPU µs per call of one redis-benchmark run of N/PER calls ($1 = PER
# joins each), per join, and joins/s (over the run's wall time).
# Also the command's own time per join as Redis counts it (INFO
# commandstats' usec_per_call, the command alone: no reading or writing).
measure() {
  local per=$1; shift
  local calls=$((N / per)) c0=$(cpu $rpid) t0=$(date +%s.%N)
  redis-cli -p $RPORT CONFIG RESETSTAT >/dev/null
  $on_other_core redis-benchmark -p $RPORT -n $calls -c $C -r 100000000000 -q "$@" >/dev/null
  report $per $calls $c0 $t0 $1
}
# What Redis spent on the $2 calls of $1 joins (or SETs) of command $5 since
# CPU time $3 and wall time $4.
report() {
  local per=$1 calls=$2 c0=$3 t0=$4
  local own=$(redis-cli -p $RPORT INFO commandstats | tr -d '\r' \
    | awk -F'[=,]' -v c="cmdstat_$(echo $5 | tr A-Z a-z):" 'index($0, c) == 1 {print $6}')
  awk -v a=$c0 -v b=$(cpu $rpid) -v n=$calls -v per=$per -v t0=$t0 -v t1=$(date +%s.%N) -v own=$own \
    'BEGIN{printf "%.2f µs of Redis CPU per call, %.2f per join (the command itself %.2f), %.0f joins/s", (b-a)*1e6/n, (b-a)*1e6/(n*per), own/per, n*per/(t1-t0)}'
}
# N joins to room b, 64 per call, $1 calls a second (each a new visitor).
paced() {
  local calls=$((N / 64)) c0=$(cpu $rpid) t0=$(date +%s.%N)
  redis-cli -p $RPORT CONFIG RESETSTAT >/dev/null
  $on_other_core python3 - $RPORT $sha $1 $calls <<'PY'
import random, sys, time
import redis
port, sha, rate, calls = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
keys = [f"wr:{{b}}:{key}" for key in
        "room line seen visitors active admissions arrivals users draw entries user-of".split()]
client = redis.Redis(port=port)
due = time.perf_counter()
for _ in range(calls):
    joins = ["%016x" % random.getrandbits(64) for _ in range(64)]
    client.evalsha(sha, len(keys), *keys, "PUBLISH", "", *joins)
    due += 1 / rate
    time.sleep(max(0.0, due - time.perf_counter()))
PY
  report 64 $calls $c0 $t0 EVALSHA
}
# $2 joins per call to room $1, each join's argument $3 (default: a new
# visitor, no option).
joins() {
  local room=$1 per=$2 join=${3:-$JOIN} keys=() fields=()
  for key in room line seen visitors active admissions arrivals users draw entries user-of; do
    keys+=("wr:{$room}:$key")
  done
  for _ in $(seq 1 $per); do
    fields+=("$join")
  done
  measure $per EVALSHA $sha ${#keys[@]} "${keys[@]}" PUBLISH "" "${fields[@]}"
}
# A join's fields (lua/join.lua's read_join): visitor, fresh, per_minute,
# pow_until, commitment, entry, key, pow_difficulty, code, address, client,
# code_guesses, pow_id, user.
# (printf -v: a command substitution would drop the trailing newlines.)
fields() { local name=$1 IFS=$'\n'; shift; printf -v "$name" '%s' "$*"; }
fields LIMITED 0000__rand_int__ 1 1000000 '' '' '' '' '' '' '' 10.__rand_int__/32 '' '' ''
fields SOLVED 0000__rand_int__ 1 '' 99999999999999 '' '' '' 20 '' '' '' '' __rand_int__ ''
fields CODED 0000__rand_int__ 1 '' '' '' '' '' '' $CODE_HASH '' '' '' '' ''
echo "start $(date -u +%H:%M:%S) $(cat /proc/loadavg); the working tree on $(git rev-parse --short HEAD)"
echo "SET: $(measure 1 SET key:__rand_int__ value)"
for per in $SIZES; do echo "$per per call: $(joins b $per)"; done
for per in $(echo $SIZES | tr ' ' '\n' | tac); do echo "$per per call: $(joins b $per)"; done
for rate in ${PACE:-}; do echo "64 per call, $rate calls a second: $(paced $rate)"; done
if [ -n "${FEATURES:-}" ]; then
  for round in 1 2; do
    echo "64 per call, a plain join: $(joins b 64)"
    echo "64 per call, each with the per-address limit: $(joins limit 64 "$LIMITED")"
    echo "64 per call, each with a proof of work: $(joins pow 64 "$SOLVED")"
    echo "64 per call, each with a priority code: $(joins code 64 "$CODED")"
  done
fi
echo "SET: $(measure 1 SET key:__rand_int__ value)"
places=$(redis-cli -p $RPORT zcard 'wr:{b}:line')
dataset=$(redis-cli -p $RPORT info memory | tr -d '\r' | awk -F: '$1 == "used_memory_dataset" {print $2}')
echo "Redis's data (used_memory_dataset): $dataset bytes, $((dataset / places)) per place in the line"
echo "line length: $places; priority line: $(redis-cli -p $RPORT zcard 'wr:{code}:priority'); limit's keys: $(redis-cli -p $RPORT --scan --pattern 'wr:{limit}:join-limit:*' | wc -l)"
echo "end $(date -u +%H:%M:%S) $(cat /proc/loadavg)"
kill $rpid; wait $rpid || true
