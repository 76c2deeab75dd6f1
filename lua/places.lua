-- Many visitors' places now, each read as status.lua reads one (a sign of
-- presence): one script for a batch of a node's sockets, when it must read
-- them all (the draw's positions, a resync). ARGV[3…]: the visitors.
-- Returns their places, in that order, as one JSON list.
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
local out = {}
if room.closed == '1' then
  for _ = 3, #ARGV do
    table.insert(out, closed_place())
  end
  return cjson.encode(out)
end
local now = now_ms()
expire_passes(now, room)
-- Reading places changes no summary: read it once for all of them.
local shared = { line = line(room), facts = facts(room) }
for i = 3, #ARGV do
  local read, kind = place(room, ARGV[i], now, shared)
  if waits(kind) then mark_present(ARGV[i], now) end
  table.insert(out, read)
end
return cjson.encode(out)
