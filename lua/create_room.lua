-- Creates a room, or replaces a closed one. ARGV[3], ARGV[4]: a fresh draw
-- seed and its commitment, kept if the room has an opens_at; ARGV[5]: the
-- config (`StoredConfig`); ARGV[6…8]: its schedule (see write_schedule).
-- KEYS[12…]: the room's sale keys (same hash tag): a room created again
-- under an old id starts with no sale, hold or order of its predecessor's.
schedule_applies = false
local room = load_room()
if room and room.closed ~= '1' then return redis.error_reply(EXISTS) end
return make_room(ARGV[3], ARGV[4], ARGV[5], { schedule = ARGV[6], next_change_at = ARGV[7], held = ARGV[8] })
