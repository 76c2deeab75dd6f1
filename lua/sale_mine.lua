-- The visitor's held and confirmed claims, as a JSON list. ARGV[2]: visitor.
local missing = require_sale()
if missing then return missing end
expire_holds(now_ms())
local out = {}
for _, id in ipairs(split(redis.call('HGET', K_MINE, ARGV[2]) or '', ',')) do
  local c = load_claim(id)
  if c and (c.state == 'held' or c.state == 'confirmed') then table.insert(out, claim_reply(id, c)) end
end
return cjson.encode(out)
