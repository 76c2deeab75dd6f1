-- Up to ARGV[4] entrants after ARGV[3] (a member '<key hex>:<entry>', or ''
-- for the first), in drawn order; refused before the opening.
local room, err = open_room()
if not room then return err end
if (room.opens_at or '') == '' then return redis.error_reply(NODRAW) end
if not opened(room, now_ms()) then return redis.error_reply(NOTDRAWN) end
local from = ARGV[3] == '' and '-' or ('(' .. ARGV[3])
return redis.call('ZRANGE', K_ENTRIES, from, '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[4]))
