-- Creates a room, or replaces a closed one. ARGV[3], ARGV[4]: a fresh draw
-- seed and its commitment, kept if the room has an opens_at; ARGV[5…]:
-- config field/value pairs. KEYS[12…]: the room's sale keys (same hash tag): a room created again under
-- an old id starts with no sale, hold or order of its predecessor's.
local room = load_room()
if room and room.closed ~= '1' then return redis.error_reply(EXISTS) end
local now = now_ms()
-- UNLINK: a draw of a million entrants is freed in the background.
redis.call('UNLINK', K_ROOM, K_LINE, K_SEEN, K_VISITORS, K_ACTIVE, K_ADMISSIONS, K_ARRIVALS, K_USERS,
  K_DRAW, K_ENTRIES, K_USER_OF)
for i = 12, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('HSET', K_ROOM, unpack(ARGV, 5))
if redis.call('HGET', K_ROOM, 'opens_at') ~= '' then
  redis.call('HSET', K_ROOM, 'draw_seed', ARGV[3], 'draw_commitment', ARGV[4])
end
local admit_per_tick = redis.call('HGET', K_ROOM, 'admit_per_tick')
redis.call('HSET', K_ROOM, 'closed', '0', 'created_at', now, 'tokens', admit_per_tick,
  'last_tick', now, 'last_tick_ran', '', 'achieved_rate', '0', 'version', 0, 'next_seq', 0,
  'admitted_total', 0, 'config_rev', 0, 'turned_away', 0, 'no_shows', 0)
return now
