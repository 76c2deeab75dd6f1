-- Adds a group of priority codes to an open room.
-- ARGV[3]: the group's name; ARGV[4]: its priority; ARGV[5]: uses per code;
-- ARGV[6…]: the codes' SHA-256 (hex); the codes themselves never reach
-- the store. Refused with GROUPEXISTS if the room has a group of that name,
-- TOOMANYGROUPS past MAX_GROUPS. Returns how many codes the group holds.
local room, err = open_room()
if not room then return err end
local group = ARGV[3]
if redis.call('HEXISTS', K_GROUPS, group) == 1 then return redis.error_reply(GROUPEXISTS) end
if redis.call('HLEN', K_GROUPS) >= MAX_GROUPS then return redis.error_reply(TOOMANYGROUPS) end
local codes_key = ROOM_PREFIX .. CODES_KEY .. group
-- A group of that name removed before left nothing, but be sure.
redis.call('UNLINK', codes_key)
local pairs_of = {}
for i = 6, #ARGV do
  table.insert(pairs_of, ARGV[i])
  table.insert(pairs_of, 0)
end
if #pairs_of > 0 then chunked('HSET', codes_key, pairs_of) end
local total = redis.call('HLEN', codes_key)
redis.call('HSET', K_GROUPS, group, records.group.write(ARGV[4], ARGV[5], total))
redis.call('HSET', K_GROUPS_USED, group, 0)
return total
