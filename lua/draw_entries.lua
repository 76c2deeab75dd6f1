-- Up to ARGV[4] entrants after ARGV[3] (a member '<key hex>:<entry>', or ''
-- for the first), in drawn order: the code holders first (K_PENTRIES, by
-- priority, then member), then everyone else (K_ENTRIES, by member);
-- refused before the opening.
local room, err = open_room()
if not room then return err end
if not room.cfg.opens_at_ms then return redis.error_reply(NODRAW) end
if not opened(room, now_ms()) then return redis.error_reply(NOTDRAWN) end
local after, limit = ARGV[3], tonumber(ARGV[4])
if after ~= '' and not redis.call('ZSCORE', K_PENTRIES, after) then
  return redis.call('ZRANGE', K_ENTRIES, '(' .. after, '+', 'BYLEX', 'LIMIT', 0, limit)
end
local out = {}
local from = 0
if after ~= '' then from = redis.call('ZRANK', K_PENTRIES, after) + 1 end
if limit > 0 then out = redis.call('ZRANGE', K_PENTRIES, from, from + limit - 1) end
if #out < limit then
  for _, member in ipairs(redis.call('ZRANGE', K_ENTRIES, '-', '+', 'BYLEX', 'LIMIT', 0, limit - #out)) do
    table.insert(out, member)
  end
end
return out
