-- Keeps a health sample of the room's origin that a node took after a tick
-- it ran (autotune): '<epoch> <latency ms> <failure>' (`Sample::stored`:
-- the epoch its probe was handed out in, tune_epoch; failure 'ok' for
-- none, 'failed', 'timeout' or the status), the last SAMPLES_KEPT of them,
-- for the ticks to decide from. ARGV[3]: the latency; ARGV[4]: the
-- failure; ARGV[5]: the probe's epoch. A room without autotune keeps none,
-- and a sample of an epoch past (the rate changed while it was on its
-- way) is dropped, as words::autotune's Tuning::record drops it.
local room, err = open_room()
if not room then return err end
if not room.cfg.autotune then return 0 end
if tonumber(ARGV[5]) ~= (tonumber(room.tune_epoch or '') or 0) then return 0 end
redis.call('RPUSH', TUNE_KEYS.samples, ARGV[5] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
redis.call('LTRIM', TUNE_KEYS.samples, -SAMPLES_KEPT, -1)
return 1
