-- Arrivals could not be recorded for a while (the store was unreachable, so
-- /api/verify let passes through on their signature alone): every admitted
-- visitor not seen yet gets the room's whole arrival grace again, counted
-- from now (a later deadline stays), and the room's count of resumptions
-- goes up; unless it went up since ARGV[3], the count the caller last saw
-- ('' for none): then another node resumed after the same outage, and this
-- call changes nothing. O(passes not yet seen). Returns the count.
local room, refused = open_room()
if not room then return refused end
local count = num(room, 'arrival_resumptions') or 0
if ARGV[3] ~= '' and count > tonumber(ARGV[3]) then return count end
count = count + 1
redis.call('HSET', K_ROOM, 'arrival_resumptions', count)
local grace = arrival_grace_ms(room)
if not grace then return count end
local resumed_due = now_ms() + grace
local earlier = redis.call('ZRANGEBYSCORE', K_ARRIVALS, '-inf', '(' .. resumed_due)
local moved = {}
for _, visitor in ipairs(earlier) do
  table.insert(moved, resumed_due)
  table.insert(moved, visitor)
end
if #moved > 0 then chunked('ZADD', K_ARRIVALS, moved) end
return count
