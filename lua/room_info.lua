-- An open room's config and stats (`WireRoomInfo`): { room (its stored
-- fields, the config among them as `config`), waiting, active, admitted_last_minute, oldest_wait_ms, pre_queue,
-- bypassed_active, priority_waiting, entrants, priority_entrants, opened,
-- now, schedule (`Schedule::stored`, or absent), tune_changes (autotune's
-- last CHANGES_SHOWN, JSON each) } as JSON.
-- The node applies a due schedule itself (see schedule_applies).
schedule_applies = false
local room, err = open_room()
if not room then return err end
local now = now_ms()
-- With an entry due, the node applies it and reads again: the sweep waits
-- for it, since the entry may change what ends a pass (session_idle_s), as
-- the memory store applies it before sweeping.
if not schedule_due(room, now) then expire_passes(now, room) end
local oldest = 0
-- The head: the priority line's, the draw's ('key:visitor'), or the line's.
local head = redis.call('ZRANGE', K_PRIO, 0, 0)
if #head > 0 then
  head = { string.match(head[1], ':(.+)$') or head[1] }
else
  head = redis.call('ZRANGE', K_DRAW, 0, 0)
  if #head > 0 then
    head = { string.match(head[1], ':(.+)$') }
  else
    head = redis.call('ZRANGE', K_LINE, 0, 0)
  end
end
if #head > 0 then
  local record = redis.call('HGET', K_VISITORS, head[1])
  local joined = record and string.match(record, '|(%d+)$')
  if joined then oldest = math.max(0, now - tonumber(joined)) end
end
local is_open = opened(room, now)
-- The record as stored: its config is the `config` field's JSON, read by
-- the node.
room.cfg = nil
return cjson.encode({ room = room, waiting = waiting_count(), active = redis.call('ZCARD', K_ACTIVE),
  admitted_last_minute = admitted_between(now - RATE_WINDOW_MS, now), oldest_wait_ms = oldest,
  bypassed_active = redis.call('ZCOUNT', K_BYPASSED, '(' .. now, '+inf'),
  pre_queue = is_open and 0 or (redis.call('ZCARD', K_DRAW) + redis.call('ZCARD', K_PRIO)),
  priority_waiting = redis.call('ZCARD', K_PRIO),
  entrants = redis.call('ZCARD', K_ENTRIES) + redis.call('ZCARD', K_PENTRIES),
  priority_entrants = redis.call('ZCARD', K_PENTRIES),
  opened = is_open, now = now, schedule = redis.call('GET', TUNE_KEYS.schedule) or nil,
  tune_changes = redis.call('LRANGE', TUNE_KEYS.changes, -CHANGES_SHOWN, -1) })
