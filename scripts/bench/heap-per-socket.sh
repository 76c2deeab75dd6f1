#!/usr/bin/env bash
# Usage: scripts/bench/heap-per-socket.sh TAG CHECKOUT [N]
# Where a held socket's heap goes: CHECKOUT's release server under heaptrack
# holds N waiting sockets (10,000 by default; the sockets row's room and
# tool), and is killed (SIGKILL) half-way through the hold, so that what
# heaptrack counts as leaked is the heap live while they are held. Prints
# the heap by owner, per socket (bytes ÷ N), from each allocation's stack.
# Needs heaptrack, heaptrack_print, c++filt and python3.
set -eu
. "$(dirname "$0")/own.sh"
TAG=$1 DIR=$2 N=${3:-10000} PORT=${PORT:-18701} OUT=${OUT:-/tmp/heap}
mkdir -p $OUT
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
TOOL=${TOOL:-target/release/waitroom-load}
rm -f $OUT/$TAG.zst
WAITROOM_ADMIN_TOKEN=$T heaptrack -o $OUT/$TAG $DIR/target/release/waitroom --drain-s 0 \
  --listen 127.0.0.1:$PORT > $OUT/$TAG.server.log 2>&1 &
# The server itself, not heaptrack's script, whose command line names it too.
server() { for p in $(pgrep -x waitroom); do tr '\0' ' ' < /proc/$p/cmdline | grep -q -- "--listen 127.0.0.1:$PORT " && echo $p; done; }
until pid=$(server) && [ -n "$pid" ]; do sleep 0.2; done
own $pid $PORT
until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.2; done; sleep 1
$TOOL --json sockets --url http://127.0.0.1:$PORT --room sockets-10000 --admin-token $T \
  --sockets $N --source-ips 2 --hold 20 --server-pid $pid > $OUT/$TAG.json 2> $OUT/$TAG.log &
tool=$!
until grep -q "^holding" $OUT/$TAG.log; do sleep 0.2; done
sleep 10
kill -KILL $pid
wait $tool || true
wait || true
heaptrack_print -f $OUT/$TAG.zst --print-peaks 0 --print-allocators 0 --print-temporary 0 \
  --print-leaks 0 -F $OUT/$TAG.stacks --flamegraph-cost-type leaked > /dev/null
c++filt < $OUT/$TAG.stacks | sed -E 's/\[[0-9a-f]{16}\]//g' > $OUT/$TAG.stacks.txt
python3 - $OUT/$TAG.stacks.txt $N <<'PY'
import re, sys
from collections import defaultdict
path, n = sys.argv[1], float(sys.argv[2])
# Each stack goes to the owner whose pattern matches nearest its allocation.
owners = [
    ("actix-ws: the Session's channel, first 32-slot block", r"new<> \(block.rs\).{0,400}?handle_with_protocols"),
    ("actix-ws: the Session's channel, its state", r"channel_from_list.{0,400}?handle_with_protocols"),
    ("actix-ws: the Session's send future and closed flag", r"new \(session.rs\)"),
    ("actix-ws: the boxed response body", r"message_body.rs.{0,200}?handle_with_protocols|handle_with_protocols.{0,200}?message_body.rs"),
    ("actix-ws: the connection-closed oneshot", r"oneshot.rs.{0,200}?handle_with_protocols|handle_with_protocols.{0,200}?oneshot.rs"),
    ("the request's log span (tracing)", r"tracing_subscriber|on_request_start|StreamSpan<> \(server.rs\) < map_into_boxed_body"),
    ("tokio: the connection's I/O registration", r"registration_set|add_source"),
    ("the connection's Arc<TcpStream>", r"\(server.rs\) < new<> \(sync.rs\)"),
    ("the hub's registry entries", r"register \(registry.rs\)"),
    ("the lane's queue", r"send \(lane.rs\)"),
    ("the lane", r"new \(lane.rs\)"),
    ("the relay's pipe", r"pipe \(server.rs\)"),
    ("the heartbeat's interval timer", r"internal_interval_at"),
    ("the frame guard (boxed payload, flag)", r"frame_guard|\{async_fn#0\} \(sockets.rs\) < pin<> \(boxed.rs\)"),
    ("the ticket's copy (Arc<str>)", r"\{async_fn#0\} \(sockets.rs\) < from \(sync.rs\)"),
    ("the outlet", r"\{async_fn#0\} \(sockets.rs\) < new<> \(sync.rs\)"),
    ("not per socket: the store's visitors (joined before)", r"\(visitor.rs\)|\(admission.rs\)|with_chance"),
    ("not per socket: metrics' histogram samples", r"record \(registry.rs\)"),
    ("not per socket: a fan-out in flight", r"\(fanout.rs\)|deliver \(hub.rs\)|outlets \(registry.rs\)"),
]
def owner(stack):
    if "new_task<> (mod.rs)" in stack:
        rest = stack[stack.index("new_task<> (mod.rs)"):]
        a, b = rest.find("(sockets.rs)"), rest.find("(server.rs)")
        if a >= 0 and (b < 0 or a < b):
            return "the socket loop's task"
        if b >= 0:
            return "the relay's task"
    best = None
    for name, pattern in owners:
        m = re.search(pattern, stack)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), name)
    return best[1] if best else "not per socket: startup and the rest"
sums = defaultdict(int)
for line in open(path):
    stack, _, size = line.rstrip("\n").rpartition(" ")
    sums[owner(" < ".join(reversed(stack.split(";"))))] += int(size)
per = sum(v for k, v in sums.items() if not k.startswith("not per socket"))
for name, v in sorted(sums.items(), key=lambda kv: (kv[0].startswith("not"), -kv[1])):
    print("%7.0f B  %s" % (v / n, name))
print("%7.0f B  per socket, the lines above 'not per socket'" % (per / n))
print("%7.0f B  all live heap ÷ %d" % (sum(sums.values()) / n, n))
PY
