-- An open room's config and stats: { field/value pairs…, waiting, active,
-- admitted_last_minute, oldest_wait_ms }.
local room, err = open_room()
if not room then return err end
local now = now_ms()
expire_passes(now)
local oldest = 0
local head = redis.call('ZRANGE', K_LINE, 0, 0)
if #head > 0 then
  local record = redis.call('HGET', K_VISITORS, head[1])
  local joined = record and string.match(record, '^w|%d+|(%d+)$')
  if joined then oldest = math.max(0, now - tonumber(joined)) end
end
local out = redis.call('HGETALL', K_ROOM)
table.insert(out, redis.call('ZCARD', K_LINE))
table.insert(out, redis.call('ZCARD', K_ACTIVE))
table.insert(out, admitted_between(now - RATE_WINDOW_MS, now))
table.insert(out, oldest)
return out
