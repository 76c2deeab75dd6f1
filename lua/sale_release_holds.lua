-- Gives every hold of a visitor back to stock (their pass was taken back);
-- orders stay. ARGV[2]: visitor. Returns how many holds were given back.
local missing = require_sale()
if missing then return missing end
local now = now_ms()
expire_holds(now)
local released = 0
for _, mine in ipairs(settled_claims_of(ARGV[2], now)) do
  if mine.claim and mine.claim.state == CLAIM_HELD then
    give_back(mine.id, mine.claim, CLAIM_RELEASED)
    released = released + 1
  end
end
return released
