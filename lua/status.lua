-- A visitor's place now; a sign of presence. ARGV[3]: the visitor.
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return cjson.encode(closed_place()) end
local now = now_ms()
expire_passes(now, room)
local out, kind = place(room, ARGV[3], now)
if waits(kind) then mark_present(ARGV[3], now) end
return cjson.encode(out)
