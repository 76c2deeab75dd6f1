-- A visitor's place, read to check their pass (/api/verify, the sale): an
-- admitted visitor has arrived, so their pass is no longer reclaimed as a
-- no-show. ARGV[3]: the visitor.
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return cjson.encode(closed_place()) end
local now = now_ms()
expire_passes(now)
redis.call('ZREM', K_ARRIVALS, ARGV[3])
-- (The parentheses keep place()'s first value, the place.)
return cjson.encode((place(room, ARGV[3], now)))
