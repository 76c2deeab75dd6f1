-- Arrivals could not be recorded for a while (the store was unreachable, so
-- /api/verify let passes through on their signature alone): every admitted
-- visitor not seen yet gets the room's whole arrival grace again, counted
-- from now (a later deadline stays), and the room's count of resumptions
-- goes up; unless it went up since ARGV[3], the count the caller last saw
-- ('' for none): then another node resumed after the same outage, and this
-- call changes nothing. One step whatever the crowd: the deadline is written
-- once (arrivals_resumed_at, arrivals_resumed_due), and tick.lua's no-show
-- sweep moves each arrival of a visitor admitted before it to it, as it
-- meets one. Returns the count.
local room, refused = open_room()
if not room then return refused end
local count = num(room, 'arrival_resumptions') or 0
if ARGV[3] ~= '' and count > tonumber(ARGV[3]) then return count end
count = count + 1
redis.call('HSET', K_ROOM, 'arrival_resumptions', count)
local grace = arrival_grace_ms(room)
if not grace then return count end
local now = now_ms()
local due = math.max(now + grace, tonumber(room.arrivals_resumed_due or '') or 0)
redis.call('HSET', K_ROOM, 'arrivals_resumed_at', now, 'arrivals_resumed_due', due)
return count
