-- What is left: { kind, stock_left, per_user_limit, hold_ttl_s, seat, state, … }
-- with seat states '' (free), 'h:<claim>' (held) or 's:<claim>' (sold).
local missing = require_sale()
if missing then return missing end
expire_holds(now_ms())
local sale = redis.call('HMGET', K_SALE, 'kind', 'stock_left', 'per_user_limit', 'hold_ttl_s')
for _, value in ipairs(redis.call('HGETALL', K_SEATS)) do table.insert(sale, value) end
return sale
