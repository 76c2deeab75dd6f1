-- Applies a table of the rooms file (--rooms) unless it is the table the
-- room was under last: the check and the write are this one step, so that
-- nodes starting at once with the same file apply it once, and a restart
-- with an unchanged file leaves what an operator changed live alone.
-- ARGV[3]: the table's hash, kept in the room's record as `applied` (a
-- closed room's record keeps it too: an unchanged table does not make it
-- again); ARGV[4]: the config_rev of the open room the config was made
-- from, or '' if it was made for a new room (a room found otherwise was
-- changed since it was read: CONFLICT, and the node reads it again);
-- ARGV[5], ARGV[6]: a fresh draw seed and its commitment; ARGV[7]: the
-- config (`StoredConfig`); ARGV[8…10]: its schedule (see write_schedule).
-- KEYS[12…]: the room's sale keys.
schedule_applies = false
local plan = { schedule = ARGV[8], next_change_at = ARGV[9], held = ARGV[10] }
local room = load_room()
local open = room and room.closed ~= '1'
if room and room.applied == ARGV[3] then
  if open then return TABLE_UNCHANGED end
  return TABLE_STILL_CLOSED
end
if open then
  if room.config_rev ~= ARGV[4] then return redis.error_reply(CONFLICT) end
  reconfigure(ARGV[5], ARGV[6], ARGV[7], plan)
  redis.call('HSET', K_ROOM, 'applied', ARGV[3])
  return TABLE_CHANGED
end
if ARGV[4] ~= '' then return redis.error_reply(CONFLICT) end
make_room(ARGV[5], ARGV[6], ARGV[7], plan)
redis.call('HSET', K_ROOM, 'applied', ARGV[3])
return TABLE_CREATED
