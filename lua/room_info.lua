-- An open room's config and stats: { field/value pairs…, waiting, active,
-- admitted_last_minute, oldest_wait_ms, pre_queue, entrants, opened ('1'
-- or '0'), now }.
local room, err = open_room()
if not room then return err end
local now = now_ms()
expire_passes(now)
local oldest = 0
local head = redis.call('ZRANGE', K_DRAW, 0, 0)
if #head > 0 then
  head = { string.match(head[1], ':(.+)$') }
else
  head = redis.call('ZRANGE', K_LINE, 0, 0)
end
if #head > 0 then
  local record = redis.call('HGET', K_VISITORS, head[1])
  local joined = record and string.match(record, '|(%d+)$')
  if joined then oldest = math.max(0, now - tonumber(joined)) end
end
local is_open = opened(room, now)
local out = redis.call('HGETALL', K_ROOM)
table.insert(out, waiting_count())
table.insert(out, redis.call('ZCARD', K_ACTIVE))
table.insert(out, admitted_between(now - RATE_WINDOW_MS, now))
table.insert(out, oldest)
table.insert(out, is_open and 0 or redis.call('ZCARD', K_DRAW))
table.insert(out, redis.call('ZCARD', K_ENTRIES))
table.insert(out, is_open and '1' or '0')
table.insert(out, now)
return out
