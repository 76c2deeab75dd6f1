-- Keeps a health sample of the room's origin that a node took after a tick
-- it ran (autotune): '<at> <latency ms> <failure>' (`Sample::stored`: 'ok'
-- for none, 'failed', 'timeout' or the status), the last SAMPLES_KEPT of
-- them, for the ticks to decide from. ARGV[3]: the latency; ARGV[4]: the
-- failure. A room without autotune keeps none.
local room, err = open_room()
if not room then return err end
if not room.cfg.autotune then return 0 end
redis.call('RPUSH', TUNE_KEYS.samples, now_ms() .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
redis.call('LTRIM', TUNE_KEYS.samples, -SAMPLES_KEPT, -1)
return 1
