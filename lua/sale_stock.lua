-- What the room's line needs: { units or seats free, holds outstanding }.
local missing = require_sale()
if missing then return missing end
expire_holds(now_ms())
local left
if redis.call('HGET', K_SALE, 'kind') == 'stock' then
  left = tonumber(redis.call('HGET', K_SALE, 'stock_left'))
else
  left = 0
  for _, owner in ipairs(redis.call('HVALS', K_SEATS)) do
    if owner == '' then left = left + 1 end
  end
end
return { left, redis.call('ZCARD', K_HOLDS) }
