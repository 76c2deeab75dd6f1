-- Joins the line, passes straight through, or returns the existing place.
-- ARGV[3]: the visitor.
local room, err = open_room()
if not room then return err end
local now = now_ms()
expire_passes(now)
local visitor = ARGV[3]
local record = redis.call('HGET', K_VISITORS, visitor)
local kind = record and string.sub(record, 1, 1)
if kind == 'w' then
  mark_present(visitor, now)
elseif kind ~= 'a' then
  local tokens = num(room, 'tokens')
  if room.paused ~= '1' and tokens > 0 and redis.call('ZCARD', K_LINE) == 0 and under_cap(room) then
    admit(room, visitor, now)
    redis.call('HSET', K_ROOM, 'tokens', tokens - 1, 'admitted_total', num(room, 'admitted_total') + 1)
    record_admissions(now, 1)
  else
    local seq = num(room, 'next_seq') + 1
    redis.call('HSET', K_ROOM, 'next_seq', seq)
    redis.call('ZADD', K_LINE, seq, visitor)
    redis.call('ZADD', K_SEEN, now, visitor)
    redis.call('HSET', K_VISITORS, visitor, 'w|' .. seq .. '|' .. now)
  end
end
return place(room, visitor)
