-- The raw fields of a room's report (`WireReport` in
-- src/store/redis/replies.rs, which makes the report of them): the ledger
-- of the room made at ARGV[3] (ms, its created_at), or with '' of the room
-- under this id now (open, or closed last); its rows; and for an open room
-- its own hash, whose counts the ledger leaves to it (see ledger in
-- lua/lib.lua). { missing = true } when no such ledger is kept.
-- The node applies a due schedule itself (see schedule_applies).
schedule_applies = false
local room = load_room()
local now = now_ms()
local life
if ARGV[3] == '' then
  life = room and (room.life or '0')
else
  local lives = redis.call('HGETALL', ROOM_PREFIX .. REPORTS_KEY)
  -- Of rooms made in the same millisecond, the last made.
  for i = 1, #lives, 2 do
    if string.match(lives[i + 1], '^(%d+)|') == ARGV[3] and (not life or tonumber(lives[i]) > tonumber(life)) then
      life = lives[i]
    end
  end
end
if not life then return cjson.encode({ missing = true }) end
local key = ROOM_PREFIX .. LEDGER_KEY .. life
local flat = redis.call('HGETALL', key)
local current = room and room.closed ~= '1' and (room.life or '0') == life
-- An open room made before rooms kept ledgers has none (or only what was
-- counted since): its report is its own hash's counts.
if #flat == 0 and not current then return cjson.encode({ missing = true }) end
local fields = {}
for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
local out = { ledger = fields, now = now,
  minutes = redis.call('LRANGE', ROOM_PREFIX .. MINUTES_KEY .. life, 0, -1),
  hours = redis.call('LRANGE', ROOM_PREFIX .. HOURS_KEY .. life, 0, -1) }
if current then
  out.opened = opened(room, now)
  out.entrants = redis.call('ZCARD', K_ENTRIES) + redis.call('ZCARD', K_PENTRIES)
  out.priority_entrants = redis.call('ZCARD', K_PENTRIES)
  room.cfg = nil
  out.room = room
  out.tune_changes = table.concat(redis.call('LRANGE', TUNE_KEYS.changes, 0, -1), '\n')
end
return cjson.encode(out)
