-- Sets up (or replaces) a sale. ARGV[2]: 'stock' or 'seats'; ARGV[3]: stock;
-- ARGV[4]: per_user_limit; ARGV[5]: hold_ttl_s; ARGV[6…]: seats.
redis.call('UNLINK', K_SALE, K_SEATS, K_CLAIMS, K_HOLDS, K_UNITS, K_IDEMPOTENCY, K_ORDERS, K_MINE)
redis.call('HSET', K_SALE, 'kind', ARGV[2], 'stock_left', ARGV[3], 'per_user_limit', ARGV[4],
  'hold_ttl_s', ARGV[5], 'next_sequence', 0)
local seats = {}
for i = 6, #ARGV do
  table.insert(seats, ARGV[i])
  table.insert(seats, '')
  if #seats >= CHUNK then
    redis.call('HSET', K_SEATS, unpack(seats))
    seats = {}
  end
end
if #seats > 0 then redis.call('HSET', K_SEATS, unpack(seats)) end
return 1
