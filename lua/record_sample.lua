-- Keeps a health sample of the room's origin that a node took after a tick
-- it ran (autotune): '<seq> <latency ms> <failure>' (`Sample::stored`: seq
-- the room's count of samples once it is recorded, tune_recorded; failure
-- 'ok' for none, 'failed', 'timeout' or the status), the last SAMPLES_KEPT
-- of them, for the ticks to decide from. ARGV[3]: the latency; ARGV[4]:
-- the failure. A room without autotune keeps none.
local room, err = open_room()
if not room then return err end
if not room.cfg.autotune then return 0 end
local seq = redis.call('HINCRBY', K_ROOM, 'tune_recorded', 1)
redis.call('RPUSH', TUNE_KEYS.samples, seq .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
redis.call('LTRIM', TUNE_KEYS.samples, -SAMPLES_KEPT, -1)
return 1
