-- Gives up a place or an admitted slot, forgetting the visitor at once (see
-- depart). ARGV[3]: the visitor.
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return 0 end
local now = now_ms()
expire_passes(now, room)
local visitor = ARGV[3]
local record = current_record(room, visitor, now)
if not record then return 0 end
local kind = record_kind(record)
if waits(kind) or kind == records.admitted.kind then ledger().add(room, 'left', 1) end
if waits(kind) then
  local order = unqueue(room, visitor, record, now)
  redis.call('ZREM', K_SEEN, visitor)
  depart(room, visitor, now, now)
  local version = num(room, 'version') + 1
  redis.call('HSET', K_ROOM, 'version', version)
  room.version = version
  publish(room_event('left', room, { order = tostring(order) }))
elseif kind == records.admitted.kind then
  revoke(room, visitor, record, now)
else
  -- A record kept as 'l' by an older version: forgotten now.
  depart(room, visitor, now, now)
end
return 1
