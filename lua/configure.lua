-- Writes a whole new config if nobody changed it since it was read.
-- ARGV[3]: the config_rev the change was made against; ARGV[4], ARGV[5]: a
-- fresh draw seed and its commitment, taken if the room gets its first
-- opens_at (a draw's seed never changes); ARGV[6]: the config (`StoredConfig`).
local room, err = open_room()
if not room then return err end
if room.config_rev ~= ARGV[3] then return redis.error_reply(CONFLICT) end
reconfigure(ARGV[4], ARGV[5], ARGV[6])
return 1
