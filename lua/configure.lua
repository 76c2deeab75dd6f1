-- Writes a whole new config if nobody changed it since it was read.
-- ARGV[3]: the config_rev the change was made against; ARGV[4], ARGV[5]: a
-- fresh draw seed and its commitment, taken if the room gets its first
-- opens_at (a draw's seed never changes); ARGV[6…]: field/value pairs.
local room, err = open_room()
if not room then return err end
if room.config_rev ~= ARGV[3] then return redis.error_reply(CONFLICT) end
local function pace(r) return r.admit_per_tick .. '/' .. r.tick_ms .. '/' .. (r.paused or '') end
local pace_before = pace(room)
redis.call('HSET', K_ROOM, unpack(ARGV, 6))
room = load_room()
if pace(room) ~= pace_before then
  -- ETAs use the configured rate for a window (see rate()).
  redis.call('HSET', K_ROOM, 'rate_since', now_ms())
end
if room.opens_at ~= '' and (room.draw_seed or '') == '' then
  redis.call('HSET', K_ROOM, 'draw_seed', ARGV[4], 'draw_commitment', ARGV[5])
end
if room.close_when_sold_out == '0' then
  redis.call('HSET', K_ROOM, 'sold_out', '0')
  room.sold_out = '0'
end
redis.call('HSET', K_ROOM, 'config_rev', num(room, 'config_rev') + 1,
  'tokens', math.min(num(room, 'tokens'), num(room, 'admit_per_tick')))
publish(room_event('configured', room, { facts = facts(room) }))
return 1
