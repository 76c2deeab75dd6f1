-- What the room's line needs: { units or seats free, holds outstanding,
-- 1 when this call gave back a whole slice of expired holds (more may be left) }.
local missing = require_sale()
if missing then return missing end
local full = expire_holds(now_ms()) == SWEEP_SLICE
local left
if redis.call('HGET', K_SALE, 'kind') == SALE_STOCK then
  left = tonumber(redis.call('HGET', K_SALE, 'stock_left'))
else
  left = 0
  for _, owner in ipairs(redis.call('HVALS', K_SEATS)) do
    if owner == '' then left = left + 1 end
  end
end
return { left, redis.call('ZCARD', K_HOLDS), full and 1 or 0 }
