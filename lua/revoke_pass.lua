-- Takes back a visitor's pass; a waiting place is left alone.
-- ARGV[3]: the visitor; ARGV[4]: the `exp` (seconds) of the pass to take
-- back, or '' for whichever they hold; ARGV[5]: the report's count it adds
-- to ('revoked', or 'left' when its holder gave it up: PassTakenBack's
-- counted_as). Returns 1 if a pass was taken back.
local room, err = open_room()
if not room then return err end
local now = now_ms()
expire_passes(now, room)
local visitor = ARGV[3]
local record = current_record(room, visitor, now)
if not record then return 0 end
if record_kind(record) ~= records.admitted.kind then return 0 end
local _, expires_at = records.admitted.read(record)
if ARGV[4] ~= '' and math.floor(tonumber(expires_at) / 1000) ~= tonumber(ARGV[4]) then return 0 end
revoke(room, visitor, record, now)
ledger().add(room, ARGV[5], 1)
return 1
