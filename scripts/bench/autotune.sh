#!/usr/bin/env bash
# Usage: scripts/bench/autotune.sh TAG [TOOL ARGS…] (after cargo build --release --workspace).
# A drop that runs itself (BENCHMARKS.md, issue 45): one node (the memory
# store) allowed to call loopback, and `waitroom-load autotune` against it
# with its defaults (a test origin taking 40 requests/s in the tool itself,
# shoppers arriving at 14/s for 600 s, figures over the last 300 s) or the
# arguments given after TAG. The tool's JSON goes to $OUT/autotune-TAG.json
# (default /tmp), its lines to $OUT/autotune-TAG.log; BIN names the
# directory of the release binaries (default target/release).
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/own.sh
TAG=$1
shift
OUT=${OUT:-/tmp} BIN=${BIN:-target/release} PORT=${PORT:-18491}
ulimit -n 20000
T=bench-admin-token-0123456789abcdef
WAITROOM_ADMIN_TOKEN=$T RUST_LOG=warn "$BIN/waitroom" --drain-s 0 --listen 127.0.0.1:$PORT --secret s \
  --outbound-allow-networks 127.0.0.0/8 > "$OUT/autotune-$TAG-srv.log" 2>&1 &
PID=$!
own $PID $PORT
until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null; do sleep 0.2; done
echo "start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
git log --oneline -1
"$BIN/waitroom-load" --json autotune --url "http://127.0.0.1:$PORT" --room "autotune-$TAG" \
  --admin-token $T --server-pid $PID "$@" > "$OUT/autotune-$TAG.json" 2> "$OUT/autotune-$TAG.log" || true
echo "end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
kill $PID
wait $PID 2>/dev/null || true
# Everything but the progress lines.
grep -Ev '^ +[0-9]+ s: ' "$OUT/autotune-$TAG.log"
