-- Gives every hold of a visitor back to stock (their pass was taken back);
-- orders stay. ARGV[2]: visitor. Returns how many holds were given back.
local missing = require_sale()
if missing then return missing end
expire_holds(now_ms())
local released = 0
for _, id in ipairs(split(redis.call('HGET', K_MINE, ARGV[2]) or '', ',')) do
  local c = load_claim(id)
  if c and c.state == 'held' then
    give_back(id, c, 'released')
    released = released + 1
  end
end
return released
