-- Marks visitors present (they hold a socket on some node). ARGV[3…]: visitors.
-- Added, not only updated: a new place at the back of the line enters the
-- presence set here, at its visitor's first touch (see tick.lua). A socket
-- whose visitor no longer waits adds a member the tick drops once it is
-- stale, as it drops those admitted: reading each record to leave them out
-- would cost every touch more than they do.
local room = load_room()
-- A room the store no longer has (lost in a restart without persistence)
-- is an error, so the node can tell the sockets it still holds for it.
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return 0 end
local now = now_ms()
for i = 3, #ARGV, CHUNK do
  local args = {}
  for j = i, math.min(i + CHUNK - 1, #ARGV) do
    table.insert(args, now)
    table.insert(args, ARGV[j])
  end
  redis.call('ZADD', K_SEEN, 'GT', unpack(args))
end
return #ARGV - 2
