-- Confirmed claims in order of confirmation, from the order stream, as a JSON list.
local missing = require_sale()
if missing then return missing end
expire_holds(now_ms())
local out = {}
for _, entry in ipairs(redis.call('XRANGE', K_ORDERS, '-', '+')) do
  local fields = entry[2]
  local id = fields[2] -- claim_id is the first field
  table.insert(out, claim_reply(id, load_claim(id)))
end
return cjson.encode(out)
