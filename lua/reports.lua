-- The room's reports still kept, each '<created_at>|<closed_at or empty>'
-- (see ledger in lua/lib.lua); the lives whose ledger Redis has dropped
-- (past --report-keep-days) are forgotten here.
local reports = ROOM_PREFIX .. REPORTS_KEY
local lives = redis.call('HGETALL', reports)
local out = {}
for i = 1, #lives, 2 do
  if redis.call('EXISTS', ROOM_PREFIX .. LEDGER_KEY .. lives[i]) == 1 then
    table.insert(out, lives[i + 1])
  else
    redis.call('HDEL', reports, lives[i])
  end
end
return out
