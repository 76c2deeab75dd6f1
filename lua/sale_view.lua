-- What is left (`WireSale`): { kind, stock_left, per_user_limit, hold_ttl_s,
-- seats = { seat = state } } as JSON, with seat states '' (free), 'h:<claim>'
-- (held) or 's:<claim>' (sold).
local missing = require_sale()
if missing then return missing end
expire_holds(now_ms())
local sale = redis.call('HMGET', K_SALE, 'kind', 'stock_left', 'per_user_limit', 'hold_ttl_s')
local seats = {}
local flat = redis.call('HGETALL', K_SEATS)
for i = 1, #flat, 2 do seats[flat[i]] = flat[i + 1] end
return cjson.encode({ kind = sale[1] or '', stock_left = tonumber(sale[2]), per_user_limit = tonumber(sale[3]),
  hold_ttl_s = tonumber(sale[4]), seats = seats })
