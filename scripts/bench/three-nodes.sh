# Sourced by idle.sh, drop.sh and notify.sh: starts a fresh Redis on $RPORT
# and $NODES nodes (default 3) sharing it on 18481–…, from $BIN (default
# target/release) with $NODE_FLAGS besides, logging to $OUT/$NAME-*; sets
# RPID, PIDS (comma-joined in PIDLIST) and URLS (in URLLIST), and prints
# the start.
. scripts/bench/own.sh
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
redis-server --port $RPORT --bind 127.0.0.1 --save '' --appendonly no > "$OUT/$NAME-redis.log" 2>&1 &
RPID=$!
sleep 1
PIDS=() URLS=() BIN=${BIN:-target/release} NODES=${NODES:-3}
for ((i = 0; i < NODES; i++)); do
  WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn "$BIN/waitroom" --drain-s 0 --listen 127.0.0.1:$((18481 + i)) \
    --redis-url redis://127.0.0.1:$RPORT/ --secret s ${NODE_FLAGS:-} > "$OUT/$NAME-srv-$i.log" 2>&1 &
  PIDS+=($!) URLS+=(http://127.0.0.1:$((18481 + i)))
done
for ((i = 0; i < NODES; i++)); do own ${PIDS[$i]} $((18481 + i)); done
for u in "${URLS[@]}"; do until curl -sf "$u/healthz" >/dev/null; do sleep 0.2; done; done
sleep 1
PIDLIST=$(IFS=,; echo "${PIDS[*]}") URLLIST=$(IFS=,; echo "${URLS[*]}")
echo "start $(date -u +%H:%M:%S) uptime: $(uptime)"
git log --oneline -1
