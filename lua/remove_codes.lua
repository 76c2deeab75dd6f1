-- Removes a group of codes from an open room: its codes stop working at
-- once (the next join finds no group holding them). UNLINK frees a large
-- group in the background. ARGV[3]: the group. NOGROUP if there is none.
local room, err = open_room()
if not room then return err end
local group = ARGV[3]
if redis.call('HDEL', K_GROUPS, group) == 0 then return redis.error_reply(NOGROUP) end
redis.call('HDEL', K_GROUPS_USED, group)
redis.call('UNLINK', ROOM_PREFIX .. CODES_KEY .. group)
return redis.status_reply('OK')
