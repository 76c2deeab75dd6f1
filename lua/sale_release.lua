-- Gives a hold back to stock. ARGV[2]: visitor; ARGV[3]: claim id.
local missing = require_sale()
if missing then return missing end
local now = now_ms()
expire_holds(now)
local id = ARGV[3]
local c = settle(id, load_claim(id), now)
if not c or c.visitor ~= ARGV[2] then return redis.error_reply(NOCLAIM) end
if c.state == CLAIM_CONFIRMED then return redis.error_reply(CONFIRMED) end
if c.state == CLAIM_HELD then give_back(id, c, CLAIM_RELEASED) end
return 1
