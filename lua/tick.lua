-- Runs the room's tick if one is due: safe to call from every node at once,
-- since the stored time of the last tick decides. Work is O(admitted +
-- SWEEP_SLICE), never O(waiting): each sweep (absent visitors, passes never
-- seen arriving) takes a slice at most, and a tick that filled one marks
-- the room (sweep_left), so that the next call sweeps on even if no tick is
-- due (admitting nobody) and asks to come back in SWEEP_AGAIN_MS. The
-- opening is O(1), since each entrant's place in the draw was fixed when
-- they joined. Returns (`WireTick`)
-- { ran, admitted, abandoned, no_shows, waiting, active, next_due_in_ms,
-- arrival_resumptions (see resume_arrivals.lua), line, max_active, opened,
-- admitted_last_minute, probe, tuned, admit_per_tick_effective,
-- change_in_ms (until the schedule's next entry, unless held) } as JSON:
-- probe, whether this call's node takes the room's health sample; tuned,
-- 'down' or 'up' when autotune changed the rate here; the others, the room's figures for the
-- metrics and each node's history of the room, in every
-- answer (ran or not), so every node that asks reports the same.
-- ARGV[3]: the seed of this tick's random picks (16 hex digits).
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return redis.error_reply(CLOSED) end
local now = now_ms()
local tick_ms = room.cfg.tick_ms
local last_tick = num(room, 'last_tick')
-- Passes past their end are swept first, whether a tick is due or not (as
-- every operation on the room does), so that an idle room is told idle.
-- Whether the sweep filled its slice: more to sweep at the next call.
local more = expire_passes(now, room)
local waiting, active = waiting_count(), redis.call('ZCARD', K_ACTIVE)
local resumptions = num(room, 'arrival_resumptions') or 0

-- The opening is announced once, so that every node reads its pre-queue
-- sockets' drawn positions; until then the next ask is due at the opening.
local opens_at = room.cfg.opens_at_ms
local announced = false
if opens_at and room.drawn ~= '1' and now >= opens_at then
  -- The pace starts at the opening: ETAs use the configured rate for a window.
  redis.call('HSET', K_ROOM, 'drawn', '1', 'rate_since', opens_at)
  room.rate_since = tostring(opens_at)
  if redis.call('ZCARD', K_DRAW) + redis.call('ZCARD', K_PRIO) > 0 then
    local version = num(room, 'version') + 1
    redis.call('HSET', K_ROOM, 'version', version)
    room.version = version
    publish(room_event('drawn', room))
    announced = true
  end
end
-- `due_in` ms, or sooner if the opening is to be announced sooner, or a
-- schedule entry falls due sooner (unless an operator's pause holds it).
local function by_opening(due_in)
  if opens_at and room.drawn ~= '1' and now < opens_at then due_in = math.min(due_in, opens_at - now) end
  local change = tonumber(room.next_change_at or '')
  if change and room.schedule_held ~= '1' then due_in = math.min(due_in, math.max(change - now, 1)) end
  return due_in
end
local next_due = by_opening(last_tick + tick_ms - now)
-- A tick's answer: nothing was admitted, abandoned or taken back unless it ran.
local function answer(ran, counts)
  counts.ran, counts.arrival_resumptions = ran, resumptions
  counts.line, counts.max_active, counts.opened = line(room), tostring(room.cfg.max_active or ''), opened(room, now)
  counts.admitted_last_minute = admitted_between(now - RATE_WINDOW_MS, now)
  counts.sessions_lapsed = tonumber(room.sessions_lapsed or 0)
  counts.admit_per_tick_effective = per_tick(room)
  counts.outbox = redis.call('XLEN', notes.outbox)
  local change = tonumber(room.next_change_at or '')
  if change and room.schedule_held ~= '1' then counts.change_in_ms = math.max(change - now, 1) end
  return cjson.encode(counts)
end
local due = now >= last_tick + tick_ms
local sweep_left = room.sweep_left == '1'
-- The last call admitted a whole slice: this one admits on.
local admit_left = room.admit_left == '1'
-- An empty room with a full bucket has nothing to do: no write, no event,
-- so asking an idle room costs a read (the promoter's heartbeat).
local idle = waiting == 0 and active == 0 and num(room, 'tokens') >= per_tick(room)
if idle and (sweep_left or admit_left) then
  redis.call('HSET', K_ROOM, 'sweep_left', '0', 'admit_left', '0')
  sweep_left, admit_left = false, false
end
if not (due or sweep_left or admit_left) then
  return answer(announced, { waiting = waiting, active = active, next_due_in_ms = next_due })
end
if idle then
  -- Nobody waits, so the presence set holds only visitors admitted since,
  -- kept there until absent (see below): dropped a slice at a time, then
  -- this is a read.
  local stale = redis.call('ZRANGEBYSCORE', K_SEEN, '-inf', now - room.cfg.abandon_after_s * 1000,
    'LIMIT', 0, SWEEP_SLICE)
  if #stale > 0 then chunked('ZREM', K_SEEN, stale) end
  return answer(announced, { waiting = 0, active = 0, next_due_in_ms = by_opening(tick_ms) })
end
if due then last_tick = last_tick + math.floor((now - last_tick) / tick_ms) * tick_ms end

-- Autotune, as words::autotune's Tuning (take_probe, then decide): a due
-- tick hands its node the room's health probe (one a second at most,
-- whichever nodes tick) and decides the rate from the samples of probes
-- handed out since the last change (its epoch, tune_epoch), in this one step, so every node decides alike (design
-- rule 15). Returns the probe (what the node GETs, and its timeout: as
-- Autotune::check) or nil, and 'down' or 'up' on a change.
local function autotune(tune, line)
  local probed = tonumber(room.tune_probed_at or '')
  local probe = nil
  if line and (not probed or now >= probed + SAMPLE_EVERY_MS) then
    redis.call('HSET', K_ROOM, 'tune_probed_at', now)
    probe = { url = tune.health_url, timeout_ms = 2 * tune.latency_target_ms,
      epoch = tonumber(room.tune_epoch or '') or 0 }
  end
  local decision = { state = TUNE_HELD, samples = 0, at = now }
  local function settle(tuned)
    redis.call('HSET', K_ROOM, 'tune_last', cjson.encode(decision))
    return probe, tuned
  end
  if not line then
    decision.state, decision.reason = TUNE_IDLE, 'nobody waits'
    return settle(nil)
  end
  local epoch = tonumber(room.tune_epoch or '') or 0
  local target = tune.latency_target_ms
  local latencies, failures, healthy = {}, {}, true
  for _, text in ipairs(redis.call('LRANGE', TUNE_KEYS.samples, 0, -1)) do
    local of, latency, failure = string.match(text, '^(%d+) (%d+) (%S+)$')
    if tonumber(of) == epoch then
      latency = tonumber(latency)
      table.insert(latencies, latency)
      if failure ~= NO_FAILURE then table.insert(failures, failure) end
      if failure ~= NO_FAILURE or latency > target then healthy = false end
    end
  end
  local count = #latencies
  decision.samples = count
  if count == 0 then
    decision.reason = 'no sample since the last change'
    return settle(nil)
  end
  table.sort(latencies)
  -- The nearest-rank 95th percentile.
  local p95 = latencies[math.max(1, math.floor((count * 95 + 99) / 100))]
  local error_rate = #failures / count
  decision.p95_ms = p95
  decision.error_rate = math.floor(error_rate * 1000 + 0.5) / 1000
  local effective = tonumber(room.tune_effective or '') or room.cfg.admit_per_tick
  local min, max = tune.min_per_tick, tune.max_per_tick
  if max == cjson.null then max = room.cfg.admit_per_tick end
  local to = effective
  if p95 > target or error_rate > tune.error_rate_max then
    decision.state = TUNE_CUT
    if error_rate > tune.error_rate_max then
      local names = {}
      for _, name in ipairs(failures) do
        if names[#names] ~= name then table.insert(names, name) end
      end
      decision.reason = string.format('errors %.0f%% > %.0f%% (%s)', error_rate * 100,
        tune.error_rate_max * 100, table.concat(names, ', '))
    else
      decision.reason = string.format('p95 %d ms > %d ms', p95, target)
    end
    to = math.max(math.floor(effective * 7 / 10), min)
  elseif count >= HEALTHY_TO_RAISE and healthy then
    decision.state = TUNE_RAISED
    decision.reason = string.format('%d healthy samples, p95 %d ms <= %d ms', count, p95, target)
    to = math.min(effective + math.max(math.floor(max / 10), 1), max)
  else
    decision.reason = string.format('p95 %d ms <= %d ms; %d healthy samples raise the rate', p95, target,
      HEALTHY_TO_RAISE)
  end
  if to == effective then
    -- Unhealthy at the floor: the samples so far are spent (as a cut's).
    if decision.state == TUNE_CUT then redis.call('HSET', K_ROOM, 'tune_epoch', epoch + 1) end
    if decision.state ~= TUNE_HELD then
      decision.reason = string.format('%s (at %s %d)', decision.reason,
        decision.state == TUNE_CUT and 'min_per_tick' or 'max_per_tick', to)
      decision.state = TUNE_HELD
    end
    return settle(nil)
  end
  redis.call('RPUSH', TUNE_KEYS.changes, cjson.encode({ at = now, from = effective, to = to, reason = decision.reason }))
  redis.call('LTRIM', TUNE_KEYS.changes, -CHANGES_KEPT, -1)
  redis.call('HSET', K_ROOM, 'tune_effective', to, 'tune_epoch', epoch + 1)
  room.tune_effective = tostring(to)
  if to < effective then return settle(TUNED_DOWN) end
  return settle(TUNED_UP)
end
local probe, tuned = nil, nil
if due and room.cfg.autotune then probe, tuned = autotune(room.cfg.autotune, waiting > 0) end

-- Passes no /api/verify has seen within the grace are taken back (no-shows).
-- An arrival due before the last resumption's deadline, of a visitor
-- admitted before that resumption, is moved to that deadline instead
-- (resume_arrivals.lua writes it once; the sweep applies it, a slice a call).
local no_shows = 0
if arrival_grace_ms(room) then
  local due_now = redis.call('ZRANGEBYSCORE', K_ARRIVALS, '-inf', now, 'WITHSCORES', 'LIMIT', 0, SWEEP_SLICE)
  if #due_now == 2 * SWEEP_SLICE then more = true end
  local resumed_at = tonumber(room.arrivals_resumed_at or '')
  local resumed_due = tonumber(room.arrivals_resumed_due or '')
  local gone, moved = {}, {}
  for i = 1, #due_now, 2 do
    local visitor, due = due_now[i], tonumber(due_now[i + 1])
    local record = redis.call('HGET', K_VISITORS, visitor)
    local admitted_at
    if record_kind(record) == records.admitted.kind then
      admitted_at = tonumber((records.admitted.read(record)))
    end
    if admitted_at and resumed_at and admitted_at < resumed_at and due < resumed_due and resumed_due > now then
      table.insert(moved, resumed_due)
      table.insert(moved, visitor)
    else
      table.insert(gone, visitor)
      if admitted_at then
        revoke(room, visitor, record, now)
        no_shows = no_shows + 1
      end
    end
  end
  if #gone > 0 then chunked('ZREM', K_ARRIVALS, gone) end
  if #moved > 0 then chunked('ZADD', K_ARRIVALS, moved) end
  if no_shows > 0 then redis.call('HINCRBY', K_ROOM, 'no_shows', no_shows) end
end

-- Waiting visitors not seen for abandon_after_s lose their place.
local grace = room.cfg.abandon_after_s * 1000
-- The presence set may still hold visitors admitted since (a tick leaves
-- them there: removing them from a large set costs more than finding them
-- here), so only those still in line are dropped.
local absent = redis.call('ZRANGEBYSCORE', K_SEEN, '-inf', now - grace, 'LIMIT', 0, SWEEP_SLICE)
if #absent == SWEEP_SLICE then more = true end
local departed, dropped = {}, {}
-- When a place at the back of the line was made (ms), from its record.
local function joined_at(record)
  if record_kind(record) ~= records.waiting.kind then return nil end
  local _, joined = records.waiting.read(record)
  return tonumber(joined)
end
for _, visitor in ipairs(absent) do
  local record = redis.call('HGET', K_VISITORS, visitor)
  local kind = record_kind(record)
  -- A place made since the visitor's mark (back after a pass or a leave,
  -- the mark outliving what it marked) counts from its joining, as the
  -- memory store counts it: dropping the mark leaves it to the walk below.
  local made_since = kind == records.waiting.kind and (joined_at(record) or 0) > now - grace
  if waits(kind) and not made_since then
    table.insert(departed, unqueue(room, visitor, record, now))
    table.insert(dropped, visitor)
  end
end
if #absent > 0 then
  chunked('ZREM', K_SEEN, absent)
end
-- A new place at the back of the line enters the presence set only at its
-- visitor's first sign of presence (a join writes one sorted set, not two).
-- So the line is walked too, in join order (its scores, the join sequence,
-- grow with the time of joining), from where the last walk stopped
-- (walked_seq): a visitor who joined before the grace and is not in the
-- presence set was never seen, and is dropped. Those found there are the
-- sweep's above. The walk takes what is left of the slice, and reads one
-- place when no one it would reach is due.
local walk_limit = SWEEP_SLICE - #absent
if walk_limit > 0 then
  local after = '(' .. (room.walked_seq or '0')
  local first = redis.call('ZRANGEBYSCORE', K_LINE, after, '+inf', 'LIMIT', 0, 1)
  -- (A place whose record has no time of joining is passed, not waited on.)
  if #first > 0 and (joined_at(redis.call('HGET', K_VISITORS, first[1])) or 0) <= now - grace then
    local rows = redis.call('ZRANGEBYSCORE', K_LINE, after, '+inf', 'WITHSCORES', 'LIMIT', 0, walk_limit)
    local visitors = {}
    for i = 1, #rows, 2 do table.insert(visitors, rows[i]) end
    local held = redis.call('HMGET', K_VISITORS, unpack(visitors))
    local due, walked = {}, 0
    for i, visitor in ipairs(visitors) do
      local joined = joined_at(held[i])
      if joined and joined > now - grace then break end
      walked = i
      if joined then table.insert(due, i) end
    end
    redis.call('HSET', K_ROOM, 'walked_seq', rows[2 * walked])
    if walked == walk_limit then more = true end
    if #due > 0 then
      local names = {}
      for _, i in ipairs(due) do table.insert(names, visitors[i]) end
      local seen = redis.call('ZMSCORE', K_SEEN, unpack(names))
      for n, i in ipairs(due) do
        if not seen[n] then
          table.insert(departed, unqueue(room, visitors[i], held[i], now))
          table.insert(dropped, visitors[i])
        end
      end
    end
  end
end
if #dropped > 0 then
  chunked('HDEL', K_VISITORS, dropped)
  forget_kept(room, dropped)
  -- Each is told why when they come back (`expired`, `away_too_long`).
  for _, visitor in ipairs(dropped) do mark_away(room, visitor, now) end
end

-- Refill the bucket (never above one tick's worth) and spend it on the head
-- (fifo), on anyone (random), or let the whole line in (passthrough), a
-- slice at most per call: a call after one that admitted a whole slice
-- admits on with what the bucket has left.
local tokens = due and per_tick(room) or num(room, 'tokens')
local admitted = {}
-- The draw's entrants come first (they are 'key:visitor', in drawn order),
-- then the line; `random` picks among the entrants while any wait.
-- Returns { visitor, order, … } for up to n of them, taken out.
local function entrant(member)
  local visitor = string.match(member, ':(.+)$')
  local key, entry = records.drawn.read(redis.call('HGET', K_VISITORS, visitor))
  return visitor, drawn_order(key, entry)
end
-- `random`: this tick's nth pick (from 0) is whoever stands at rank
-- pick(seed, nth, count) of the draw's waiting entrants, or else of the
-- line: words::chance::pick, computed alike (the node passes the seed).
local picks = 0
local function pick(count)
  local digest = redis.sha1hex(ARGV[3] .. ':' .. picks)
  picks = picks + 1
  return math.fmod(tonumber(string.sub(digest, 1, 12), 16), count)
end
local function take_random(n)
  local out = {}
  for _ = 1, n do
    -- The priority line's first level first, as the draw's entrants.
    local first = redis.call('ZRANGE', K_PRIO, 0, 0, 'WITHSCORES')
    if #first > 0 then
      local level = math.floor(tonumber(first[2]) / LEVEL)
      local count = redis.call('ZCOUNT', K_PRIO, string.format('%.0f', level * LEVEL),
        string.format('(%.0f', (level + 1) * LEVEL))
      local rank = pick(count)
      local chosen = redis.call('ZRANGE', K_PRIO, rank, rank, 'WITHSCORES')
      redis.call('ZREM', K_PRIO, chosen[1])
      table.insert(out, string.match(chosen[1], ':(.+)$') or chosen[1])
      table.insert(out, priority_order(tonumber(chosen[2]), chosen[1]))
    else
      local in_draw = redis.call('ZCARD', K_DRAW)
      local key = in_draw > 0 and K_DRAW or K_LINE
      local count = in_draw > 0 and in_draw or redis.call('ZCARD', K_LINE)
      if count == 0 then break end
      local rank = pick(count)
      local chosen = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
      redis.call('ZREM', key, chosen[1])
      if key == K_DRAW then
        local visitor, order = entrant(chosen[1])
        table.insert(out, visitor)
        table.insert(out, order)
      else
        table.insert(out, chosen[1])
        table.insert(out, chosen[2])
      end
    end
  end
  return out
end
local function take(n, method)
  if method == METHOD_RANDOM then return take_random(n) end
  local out = {}
  local priority = redis.call('ZPOPMIN', K_PRIO, n)
  for i = 1, #priority, 2 do
    table.insert(out, string.match(priority[i], ':(.+)$') or priority[i])
    table.insert(out, priority_order(tonumber(priority[i + 1]), priority[i]))
  end
  if n - #out / 2 > 0 then
    local drawn = redis.call('ZPOPMIN', K_DRAW, n - #out / 2)
    for i = 1, #drawn, 2 do
      local visitor, order = entrant(drawn[i])
      table.insert(out, visitor)
      table.insert(out, order)
    end
  end
  local rest = n - #out / 2
  if rest > 0 then
    -- ZPOPMIN takes the head without searching the line.
    for _, value in ipairs(redis.call('ZPOPMIN', K_LINE, rest)) do table.insert(out, value) end
  end
  return out
end

-- When a waiting place's visitor joined: the last field of each kind that
-- waits (the general line's first: the commonest).
local waiting_kinds = { records.waiting, records.drawn, records.priority, records.priority_drawn }
local function joined_of(record)
  local kind = record_kind(record)
  for _, r in ipairs(waiting_kinds) do
    if kind == r.kind then return tonumber((select(r.fields, r.read(record)))) end
  end
end

-- Those among the admitted who asked to be notified, told so (the outbox's
-- `admitted`); their `near` is no longer to come.
local function admitted_called(taken)
  local called = {}
  if #taken == 0 or redis.call('EXISTS', notes.key) == 0 then return called end
  for i, raw in ipairs(redis.call('HMGET', notes.key, unpack(taken))) do
    if raw then
      local visitor, asked = taken[i], cjson.decode(raw)
      if notes.unwatch(visitor, asked) then notes.write(visitor, asked) end
      notes.send('admitted', visitor, nil, now)
      called[visitor] = true
    end
  end
  return called
end

-- `near` to those who asked and now have `ahead` or fewer ahead, as
-- words::rules::room's call_near: the line is walked from its head in its
-- order, no deeper than the largest `ahead` asked in the room (near_reach,
-- MAX_AHEAD at most), so the work follows those called, never the crowd. None in a `random` room or before the opening;
-- each called is given notify_return_s to come back.
local function call_near()
  if redis.call('EXISTS', notes.key) == 0 or queue_method(room) == METHOD_RANDOM or not opened(room, now) then
    return
  end
  local due = {}
  local reach = tonumber(room.near_reach or '') or MAX_AHEAD
  local function walk()
    for _, part in ipairs(notes.parts) do
      local offset = 0
      while true do
        local members = redis.call('ZRANGE', notes.near[part], offset, offset + CHUNK - 1)
        if #members == 0 then break end
        for _, member in ipairs(members) do
          local position = notes.position[part](member)
          if position and position > reach + 1 then return end
          local visitor = string.match(member, ':(.+)$') or member
          local asked = position and notes.read(visitor)
          if asked and position <= asked.request.ahead + 1 then
            table.insert(due, { visitor, asked, position })
          end
        end
        offset = offset + CHUNK
      end
    end
  end
  walk()
  local back_by = math.max(0, now + room.cfg.notify_return_s * 1000 - room.cfg.abandon_after_s * 1000)
  for _, call in ipairs(due) do
    local visitor, asked, position = call[1], call[2], call[3]
    notes.unwatch(visitor, asked)
    notes.write(visitor, asked)
    notes.send('near', visitor, position, now)
    redis.call('ZADD', K_SEEN, back_by, visitor)
  end
end

-- Each admission's wait (ms), from joining or, for the pre-queue, the opening.
local waits = {}
local admitting = due or admit_left
if admitting and opened(room, now) and not room.cfg.paused and not sold_out(room) then
  local method = queue_method(room)
  local n = math.min(tokens, cap_room(room))
  if method == METHOD_PASSTHROUGH then n = waiting_count() end
  n = math.min(n, SWEEP_SLICE)
  if n > 0 then
    local head = take(n, method)
    local expires_at, ends = pass_ends(room, now)
    local pass = records.admitted.write(now, expires_at)
    -- One command per structure, not one per visitor.
    local grace = arrival_grace_ms(room)
    local members, sets, passes, arrivals = {}, {}, {}, {}
    local taken = {}
    for i = 1, #head, 2 do table.insert(taken, head[i]) end
    local called = admitted_called(taken)
    -- Called back from afar: the pass waits notify_hold_s for them.
    local held = math.min(now + room.cfg.notify_hold_s * 1000, expires_at)
    for i = 1, #head, 2 do
      local visitor, seq = head[i], head[i + 1]
      table.insert(members, visitor)
      table.insert(sets, visitor)
      table.insert(sets, pass)
      table.insert(passes, called[visitor] and math.max(ends, held) or ends)
      table.insert(passes, visitor)
      if grace then
        table.insert(arrivals, called[visitor] and math.max(now + grace, held) or now + grace)
        table.insert(arrivals, visitor)
      end
      table.insert(admitted, { visitor = visitor, order = tostring(seq), admitted_at = now,
        expires_at = expires_at })
    end
    if #members > 0 then
      local waited_from = room.cfg.opens_at_ms or 0
      for i, record in ipairs(redis.call('HMGET', K_VISITORS, unpack(members))) do
        waits[i] = now - math.max(joined_of(record) or now, waited_from)
      end
      chunked('HSET', K_VISITORS, sets)
      chunked('ZADD', K_ACTIVE, passes)
      if #arrivals > 0 then chunked('ZADD', K_ARRIVALS, arrivals) end
    end
    tokens = math.max(0, tokens - #members)
  end
end

admit_left = #admitted == SWEEP_SLICE
call_near()
if admitting then
  -- Only a tick that was due, or one admitting on after it, counts for the
  -- pace (a sweep between ticks admits nobody and leaves the rate and the
  -- schedule alone).
  record_admissions(now, #admitted)
  local window_start = math.max(now - RATE_WINDOW_MS, num(room, 'created_at'))
  local span = math.max(now - window_start, tick_ms)
  local achieved = admitted_between(window_start, now) * 1000 / span
  redis.call('HSET', K_ROOM, 'tokens', tokens, 'last_tick', last_tick, 'last_tick_ran', now,
    'achieved_rate', tostring(achieved), 'admitted_total', num(room, 'admitted_total') + #admitted)
  room.last_tick_ran, room.achieved_rate = tostring(now), tostring(achieved)
end
ledger().tick(room, now, waits, #departed, waiting_count(), redis.call('ZCARD', K_ACTIVE))
-- A call between ticks that admitted and dropped no one (a sweep that
-- passed only visitors still present, or admitted) moved no place: no new
-- version and no event, so that catching up on a sweep sends the sockets
-- nothing (as words::rules::room's tick).
local moved = due or #admitted > 0 or #departed > 0
local left = { 'sweep_left', more and '1' or '0', 'admit_left', admit_left and '1' or '0' }
if moved then
  local version = num(room, 'version') + 1
  redis.call('HSET', K_ROOM, 'version', version, unpack(left))
  room.version = version
  for i, order in ipairs(departed) do departed[i] = tostring(order) end
  publish(room_event('tick', room, { admitted = admitted, departed = departed }))
else
  redis.call('HSET', K_ROOM, unpack(left))
end
local due_in = last_tick + tick_ms - now
if due_in <= 0 then due_in = tick_ms end
due_in = by_opening(due_in)
if more or admit_left then due_in = math.min(due_in, SWEEP_AGAIN_MS) end
return answer(true, { admitted = #admitted, waits = waits, abandoned = #departed, no_shows = no_shows,
  waiting = waiting_count(), active = redis.call('ZCARD', K_ACTIVE), next_due_in_ms = due_in, probe = probe,
  tuned = tuned })
