-- The groups of codes of an open room (`GroupSummary`, a JSON list):
-- group, priority, uses, total, used; never the codes.
local room, err = open_room()
if not room then return err end
local groups = redis.call('HGETALL', K_GROUPS)
local out = {}
for i = 1, #groups, 2 do
  local priority, uses, total = records.group.read(groups[i + 1])
  table.insert(out, { group = groups[i], priority = tonumber(priority), uses = tonumber(uses),
    total = tonumber(total), used = tonumber(redis.call('HGET', K_GROUPS_USED, groups[i]) or '0') })
end
return cjson.encode(out)
