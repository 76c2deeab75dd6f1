-- The visitor's held and confirmed claims, as a JSON list. ARGV[2]: visitor.
local missing = require_sale()
if missing then return missing end
local now = now_ms()
expire_holds(now)
local out = {}
for _, mine in ipairs(settled_claims_of(ARGV[2], now)) do
  local c = mine.claim
  if c and (c.state == CLAIM_HELD or c.state == CLAIM_CONFIRMED) then table.insert(out, claim_reply(mine.id, c)) end
end
return cjson.encode(out)
