-- Runs the room's tick if one is due: safe to call from every node at once,
-- since the stored time of the last tick decides. Work is O(admitted +
-- abandoned), never O(waiting). Returns
-- { ran (1 or 0), admitted, abandoned, no-shows, waiting, active, next due in ms }.
local room = load_room()
if not room then return redis.error_reply('NOROOM') end
if room.closed == '1' then return redis.error_reply('CLOSED') end
local now = now_ms()
local tick_ms = num(room, 'tick_ms')
local last_tick = num(room, 'last_tick')
local waiting, active = redis.call('ZCARD', K_LINE), redis.call('ZCARD', K_ACTIVE)
if now < last_tick + tick_ms then
  return { 0, 0, 0, 0, waiting, active, last_tick + tick_ms - now }
end
-- An empty room with a full bucket has nothing to do: no write, no event,
-- so asking an idle room costs a read (the promoter's heartbeat).
if waiting == 0 and active == 0 and num(room, 'tokens') >= num(room, 'admit_per_tick') then
  return { 0, 0, 0, 0, 0, 0, tick_ms }
end
last_tick = last_tick + math.floor((now - last_tick) / tick_ms) * tick_ms
expire_passes(now)

-- Passes no /api/verify has seen within the grace are taken back (no-shows).
local no_shows = 0
if arrival_grace_ms(room) then
  local due = redis.call('ZRANGEBYSCORE', K_ARRIVALS, '-inf', now)
  for _, visitor in ipairs(due) do
    local record = redis.call('HGET', K_VISITORS, visitor)
    if record and string.sub(record, 1, 1) == 'a' then
      revoke(visitor)
      no_shows = no_shows + 1
    end
  end
  if #due > 0 then chunked('ZREM', K_ARRIVALS, due) end
  if no_shows > 0 then redis.call('HINCRBY', K_ROOM, 'no_shows', no_shows) end
end

-- Waiting visitors not seen for abandon_after_s lose their place.
local grace = num(room, 'abandon_after_s') * 1000
-- The presence set may still hold visitors admitted since (a tick leaves
-- them there: removing them from a large set costs more than finding them
-- here), so only those still in line are dropped.
local absent = redis.call('ZRANGEBYSCORE', K_SEEN, '-inf', now - grace)
local departed, dropped = {}, {}
for _, visitor in ipairs(absent) do
  local seq = redis.call('ZSCORE', K_LINE, visitor)
  if seq then
    table.insert(departed, seq)
    table.insert(dropped, visitor)
  end
end
if #absent > 0 then
  chunked('ZREM', K_SEEN, absent)
end
if #dropped > 0 then
  chunked('ZREM', K_LINE, dropped)
  chunked('HDEL', K_VISITORS, dropped)
end

-- Refill the bucket (never above one tick's worth) and spend it on the head
-- (fifo), on anyone (random), or let the whole line in (passthrough).
local tokens = num(room, 'admit_per_tick')
local admitted = {}
if room.paused ~= '1' and not sold_out(room) then
  local method = queue_method(room)
  local n = math.min(tokens, cap_room(room))
  if method == 'passthrough' then n = redis.call('ZCARD', K_LINE) end
  if n > 0 then
    local head
    if method == 'random' then
      -- Distinct members, each as likely as any other.
      head = redis.call('ZRANDMEMBER', K_LINE, n, 'WITHSCORES')
      local chosen = {}
      for i = 1, #head, 2 do table.insert(chosen, head[i]) end
      if #chosen > 0 then chunked('ZREM', K_LINE, chosen) end
    else
      -- ZPOPMIN takes the head without searching the line.
      head = redis.call('ZPOPMIN', K_LINE, n)
    end
    local expires_at = now + num(room, 'pass_ttl_s') * 1000
    local pass = 'a|' .. now .. '|' .. expires_at
    -- One command per structure, not one per visitor.
    local grace = arrival_grace_ms(room)
    local members, records, passes, arrivals = {}, {}, {}, {}
    for i = 1, #head, 2 do
      local visitor, seq = head[i], head[i + 1]
      table.insert(members, visitor)
      table.insert(records, visitor)
      table.insert(records, pass)
      table.insert(passes, expires_at)
      table.insert(passes, visitor)
      if grace then
        table.insert(arrivals, now + grace)
        table.insert(arrivals, visitor)
      end
      table.insert(admitted, visitor .. ',' .. seq .. ',' .. now .. ',' .. expires_at)
    end
    if #members > 0 then
      chunked('HSET', K_VISITORS, records)
      chunked('ZADD', K_ACTIVE, passes)
      if #arrivals > 0 then chunked('ZADD', K_ARRIVALS, arrivals) end
    end
    tokens = math.max(0, tokens - #members)
  end
end

record_admissions(now, #admitted)
local window_start = math.max(now - RATE_WINDOW_MS, num(room, 'created_at'))
local span = math.max(now - window_start, tick_ms)
local achieved = admitted_between(window_start, now) * 1000 / span
local version = num(room, 'version') + 1
redis.call('HSET', K_ROOM, 'tokens', tokens, 'last_tick', last_tick, 'last_tick_ran', now,
  'achieved_rate', tostring(achieved), 'version', version,
  'admitted_total', num(room, 'admitted_total') + #admitted)
room.version, room.last_tick_ran, room.achieved_rate = version, tostring(now), tostring(achieved)

publish('tick|' .. summary_fields(room) .. '|' ..
  table.concat(admitted, ';') .. '|' .. table.concat(departed, ','))
return { 1, #admitted, #departed, no_shows, redis.call('ZCARD', K_LINE), redis.call('ZCARD', K_ACTIVE),
  last_tick + tick_ms - now }
