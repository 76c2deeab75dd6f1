-- Turns a hold into an order (harmless twice). ARGV[2]: visitor; ARGV[3]: claim id.
local missing = require_sale()
if missing then return missing end
local now = now_ms()
expire_holds(now)
local id = ARGV[3]
local c = settle(id, load_claim(id), now)
if not c or c.visitor ~= ARGV[2] then return redis.error_reply(NOCLAIM) end
if c.state == CLAIM_EXPIRED then return redis.error_reply(EXPIRED) end
if c.state == CLAIM_RELEASED then return redis.error_reply(RELEASED) end
if c.state == CLAIM_HELD then
  c.state, c.confirmed = CLAIM_CONFIRMED, tostring(now)
  save_claim(id, c)
  redis.call('ZREM', K_HOLDS, id)
  for _, seat in ipairs(split(c.seats, ',')) do redis.call('HSET', K_SEATS, seat, 's:' .. id) end
  -- The order log another service consumes (consumer groups work on it).
  redis.call('XADD', K_ORDERS, '*', 'claim_id', id, 'visitor', c.visitor, 'quantity', c.quantity,
    'seats', c.seats, 'sequence', c.sequence, 'confirmed_at', c.confirmed)
end
return cjson.encode(claim_reply(id, c))
