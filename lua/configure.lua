-- Writes a whole new config if nobody changed it since it was read: an
-- operator's change, or the schedule's entries the node applied.
-- ARGV[3]: the config_rev the change was made against; ARGV[4], ARGV[5]: a
-- fresh draw seed and its commitment, taken if the room gets its first
-- opens_at (a draw's seed never changes); ARGV[6]: the config
-- (`StoredConfig`); ARGV[7…9]: its schedule (see write_schedule).
schedule_applies = false
local room, err = open_room()
if not room then return err end
if room.config_rev ~= ARGV[3] then return redis.error_reply(CONFLICT) end
reconfigure(ARGV[4], ARGV[5], ARGV[6], { schedule = ARGV[7], next_change_at = ARGV[8], held = ARGV[9] })
return 1
