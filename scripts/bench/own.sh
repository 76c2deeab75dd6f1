# Sourced by the bench scripts. `own PID PORT`: waits until PID, a server
# the script started, listens on PORT; fails if it ended first. So a run
# measures its own server, never another process that answers on the port.
own() {
  local pid=$1 port=$2
  until ss -ltnpH "sport = :$port" | grep -q "pid=$pid,"; do
    kill -0 "$pid" 2>/dev/null || { echo "the server meant for :$port (pid $pid) ended before listening" >&2; return 1; }
    sleep 0.2
  done
}
