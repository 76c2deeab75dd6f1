-- Marks visitors present (they hold a socket on some node). ARGV[3…]: visitors.
local room = load_room()
if not room or room.closed == '1' then return 0 end
local now = now_ms()
for i = 3, #ARGV, CHUNK do
  local args = { 'XX' }
  for j = i, math.min(i + CHUNK - 1, #ARGV) do
    table.insert(args, now)
    table.insert(args, ARGV[j])
  end
  redis.call('ZADD', K_SEEN, unpack(args))
end
return #ARGV - 2
