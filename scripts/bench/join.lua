-- What the waiting page sends to join (static/room.js), for wrk -s (scripts/bench/redis-join.sh).
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
