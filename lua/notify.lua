-- Keeps a waiting visitor's request to be notified, or drops it, as
-- words::rules::room's notify. ARGV[3]: the visitor; ARGV[4]: the request
-- (`NotifyRequest`'s JSON), or '' to drop it; ARGV[5]: the client's block;
-- ARGV[6]: --notify-per-ip; ARGV[7]: the join limit's per-minute budget,
-- or '' for none. Answers the place (`WirePlace`).
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return redis.error_reply(CLOSED) end
local now = now_ms()
expire_passes(now, room)
local visitor, request = ARGV[3], ARGV[4]
local record = current_record(room, visitor, now)
local function answer()
  return cjson.encode((place(room, visitor, now)))
end
if not waits(record_kind(record)) then
  if request ~= '' then return redis.error_reply(NOTWAITING) end
  notes.forget(room, { visitor })
  return answer()
end
if request == '' then
  notes.forget(room, { visitor })
  redis.call('ZADD', K_SEEN, now, visitor)
  return answer()
end
local block, per_block, per_minute = ARGV[5], tonumber(ARGV[6]), ARGV[7]
local block_key = notes.block_key(room, block)
if redis.call('SISMEMBER', block_key, visitor) == 0 and redis.call('SCARD', block_key) >= per_block then
  return redis.error_reply(TOOMANYNOTIFY)
end
if per_minute ~= '' then
  -- A request holds a place as long as a join makes one: it spends a join.
  local limit_key = life_key(room, JOIN_LIMIT_KEY, block)
  local spent, wait = notes.gcra(limit_key, per_minute, now)
  if not spent then
    redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
    return redis.error_reply(RATELIMITED .. ' ' .. wait)
  end
  redis.call('SET', limit_key, spent, 'PX', spent - now)
end
if redis.call('EXISTS', notes.outbox) == 0 then
  redis.call('XGROUP', 'CREATE', notes.outbox, OUTBOX_GROUP, '0', 'MKSTREAM')
end
-- The largest `ahead` asked: the tick's walk for `near` goes no deeper.
local wanted = cjson.decode(request)
if wanted.ahead > (tonumber(room.near_reach or '') or 0) then redis.call('HSET', K_ROOM, 'near_reach', wanted.ahead) end
local before = notes.read(visitor)
notes.forget(room, { visitor })
local asked = { request = wanted, block = block, spent = before and before.spent or '' }
-- `near` is sent once per place: asking again after it changes how, not when.
local near_to_come = queue_method(room) ~= METHOD_RANDOM and not (before and not before.near_in)
if near_to_come then
  local part, member, score = notes.spot(record, visitor)
  redis.call('ZADD', notes.near[part], score, member)
  asked.near_in, asked.near_member = part, member
end
notes.write(visitor, asked)
redis.call('SADD', block_key, visitor)
-- The block's set goes with the room's life at the latest (its visitors'
-- requests are dropped one by one as their places end).
redis.call('PEXPIRE', block_key, 7 * 86400000)
-- Kept while away until `near`; after it, the return window stays.
local held = HELD_PRESENCE
if not near_to_come and queue_method(room) ~= METHOD_RANDOM then
  held = math.max(tonumber(redis.call('ZSCORE', K_SEEN, visitor) or 0), now)
end
redis.call('ZADD', K_SEEN, held, visitor)
return answer()
