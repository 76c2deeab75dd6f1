-- One claim, all or nothing: the per-user limit, the stock or every seat, the
-- hold. ARGV[2]: visitor; ARGV[3]: idempotency key or ''; ARGV[4]: new claim id;
-- ARGV[5]: 'quantity' or 'seats'; ARGV[6]: quantity; ARGV[7]: the buyer whose
-- units the limit counts (the visitor, or 'u:<user>'); ARGV[8…]: seats.
local missing = require_sale()
if missing then return missing end
local now = now_ms()
expire_holds(now)
local visitor, key, id, wants, quantity = ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local buyer = ARGV[7]
if key ~= '' then
  local first = redis.call('HGET', K_IDEMPOTENCY, visitor .. '|' .. key)
  if first then return cjson.encode(claim_reply(first, settle(first, load_claim(first), now))) end
end
local sale = redis.call('HMGET', K_SALE, 'kind', 'per_user_limit', 'hold_ttl_s')
local kind, limit, ttl = sale[1], tonumber(sale[2]), tonumber(sale[3])
if kind == SALE_SEATS and wants == WANT_QUANTITY then return redis.error_reply(WRONGKIND .. ' ' .. SALE_SEATS) end
if kind == SALE_STOCK and wants == WANT_SEATS then return redis.error_reply(WRONGKIND .. ' ' .. SALE_STOCK) end
local seats = {}
for i = 8, #ARGV do table.insert(seats, ARGV[i]) end
for _, seat in ipairs(seats) do
  if redis.call('HEXISTS', K_SEATS, seat) == 0 then return redis.error_reply(UNKNOWNSEAT .. ' ' .. seat) end
end
-- Holds past their expiry that the sweep's slice has not reached count no
-- more wherever this claim meets them: its seats' holders, the visitor's
-- own holds when the limit would refuse, and as many of the soonest expired
-- as the stock it asks for lacks. (A known user's holds made on another
-- device wait for the sweep or for a call that touches them.)
for _, seat in ipairs(seats) do
  local holder = string.match(redis.call('HGET', K_SEATS, seat), '^h:(.+)$')
  if holder then settle(holder, load_claim(holder), now) end
end
local function units() return tonumber(redis.call('HGET', K_UNITS, buyer) or '0') end
if units() + quantity > limit then
  settled_claims_of(visitor, now)
  if units() + quantity > limit then return redis.error_reply(LIMIT .. ' ' .. limit) end
end
if wants == WANT_QUANTITY then
  local function stock_left() return tonumber(redis.call('HGET', K_SALE, 'stock_left')) end
  if stock_left() < quantity then
    expire_holds(now, quantity - stock_left())
    if stock_left() < quantity then return redis.error_reply(SOLDOUT) end
  end
  redis.call('HINCRBY', K_SALE, 'stock_left', -quantity)
else
  for _, seat in ipairs(seats) do
    if redis.call('HGET', K_SEATS, seat) ~= '' then return redis.error_reply(SEATTAKEN .. ' ' .. seat) end
  end
  for _, seat in ipairs(seats) do redis.call('HSET', K_SEATS, seat, 'h:' .. id) end
end
local claim = { visitor = visitor, state = CLAIM_HELD, quantity = quantity, seats = table.concat(seats, ','),
  sequence = redis.call('HINCRBY', K_SALE, 'next_sequence', 1), expires = now + ttl * 1000, confirmed = '',
  buyer = buyer }
save_claim(id, claim)
redis.call('ZADD', K_HOLDS, claim.expires, id)
redis.call('HINCRBY', K_UNITS, buyer, quantity)
local mine = redis.call('HGET', K_MINE, visitor)
redis.call('HSET', K_MINE, visitor, mine and (mine .. ',' .. id) or id)
if key ~= '' then redis.call('HSET', K_IDEMPOTENCY, visitor .. '|' .. key, id) end
return cjson.encode(claim_reply(id, claim))
