-- Joins visitors to the line (or, before the opening, the draw), passes them
-- straight through, or returns their existing places: the joins a node
-- received while its last join call for the room was on its way, in one
-- call (see src/store/redis/join_batch.rs), each answered as it would be
-- alone. ARGV[3…]: one argument per join, read into `j` by read_join.
-- Per join:
-- visitor: the visitor; per_minute: joins per minute per client address,
-- or '' for no limit (client: that address's block, whose key holds its
-- TAT); user: the known user, or ''; pow_until: until when the
-- proof-of-work solution holds (ms), or '' for none (pow_id: the
-- solution, whose key marks it used), and pow_difficulty the difficulty
-- its challenge was made at. Both keys are named here, not declared: their
-- hash tag keeps them in the room's slot.
-- commitment: the commitment of the seed the node drew `key` (the draw
-- key, hex) for `entry` (a new entry id) with, or '': Lua has no HMAC, so
-- the node makes the key; a node without the room's seed is told
-- 'DRAWSEED'.
-- code: the SHA-256 (hex) of the join's priority code, or '': a valid one
-- puts a new place (or one waiting in the general line) in the priority
-- line and spends one use, here, so one use makes one place whichever node
-- asks.
-- address: the client's address ('4:' and 8 hex digits, '6:' and 32), or
-- '': a new arrival from the room's bypass_match networks is admitted at
-- once, outside the cap, whatever the bucket, pause, method or opening.
-- Answers one reply per join: the place (JSON, as place() makes it) with
-- `visitor`, whose place it is (a known user's place may be another
-- visitor's), or JOIN_REFUSED and the join's refusal (code and detail).

-- Whether `address` is in one of `networks` ('<family>:<hex>/<bits>'
-- each, space-separated): the whole hex digits of the prefix, then the
-- bits of one more digit.
local function in_networks(networks, address)
  if networks == nil or networks == '' or address == '' then return false end
  local family, digits = string.sub(address, 1, 1), string.sub(address, 3)
  for net_family, hex, bits in string.gmatch(networks, '(%d):(%x+)/(%d+)') do
    bits = tonumber(bits)
    local whole, rest = math.floor(bits / 4), bits % 4
    if net_family == family and string.sub(digits, 1, whole) == string.sub(hex, 1, whole) then
      if rest == 0 then return true end
      local drop = 2 ^ (4 - rest)
      local mine = tonumber(string.sub(digits, whole + 1, whole + 1), 16)
      local theirs = tonumber(string.sub(hex, whole + 1, whole + 1), 16)
      if math.floor(mine / drop) == math.floor(theirs / drop) then return true end
    end
  end
  return false
end

local room, err = open_room()
if not room then return err end
local now = now_ms()
expire_passes(now)

-- The new places at the back of the general line this call made, written
-- together by flush(): one ZADD or HSET for them all instead of four
-- commands each. Until then `pending` holds their records, and anything
-- that would read them from Redis (the same visitor again, a known user, a
-- code, a count of the line) flushes first.
local pending, pending_count = {}, 0
local line_adds, seen_adds, record_sets = {}, {}, {}
local function flush()
  if pending_count == 0 then return end
  chunked('ZADD', K_LINE, line_adds)
  chunked('ZADD', K_SEEN, seen_adds)
  chunked('HSET', K_VISITORS, record_sets)
  redis.call('HSET', K_ROOM, 'next_seq', room.next_seq)
  pending, pending_count = {}, 0
  line_adds, seen_adds, record_sets = {}, {}, {}
end

-- Everyone waiting, counted once per call and kept up by the joins that
-- add to the back of the line; nil again after any other change.
local waiting
local function waiting_now()
  if not waiting then
    flush()
    waiting = waiting_count()
  end
  return waiting
end

-- The line (everyone waiting counted, the call's new places too) and the
-- facts, for place().
local function summary()
  return { line = line(room, waiting_now()), facts = facts(room) }
end

-- What every place this call answers shares, as JSON: the facts, and the
-- line's rate, tick time and pause (no join changes them; the version and
-- `waiting` are put in per answer).
local shared_facts, line_tail
local function shared_json()
  if not shared_facts then
    shared_facts = cjson.encode(facts(room))
    local line_now = line(room, 0)
    -- Numbers and flags as text: quoted, they are JSON strings as they are.
    line_tail = ',"rate":"' .. line_now.rate .. '","tick_at":"' .. line_now.tick_at
      .. '","paused":"' .. line_now.paused .. '"}'
  end
  return shared_facts, line_tail
end

-- Join i's fields, from its argument: JOIN_FIELDS values, each but the
-- last ended by a newline (the user, last, may hold any character).
local JOIN_PATTERN = '^' .. string.rep('([^\n]*)\n', JOIN_FIELDS - 1) .. '(.*)$'
local function read_join(i)
  local j = {}
  j.visitor, j.per_minute, j.pow_until, j.commitment, j.entry, j.key, j.pow_difficulty, j.code, j.address,
    j.client, j.pow_id, j.user = string.match(ARGV[2 + i], JOIN_PATTERN)
  return j
end

-- The group that grants `code` (of those holding it, the first by priority,
-- then name, with a use left): its name and priority; or the refusal.
local function check_code(code)
  local groups = redis.call('HGETALL', K_GROUPS)
  local best, held = nil, false
  for i = 1, #groups, 2 do
    local name = groups[i]
    local priority, uses = string.match(groups[i + 1], '^(%d+)|(%d+)|')
    priority, uses = tonumber(priority), tonumber(uses)
    local spent = redis.call('HGET', ROOM_PREFIX .. CODES_KEY .. name, code)
    if spent then
      held = true
      if tonumber(spent) < uses and (not best or priority < best.priority
        or (priority == best.priority and name < best.group)) then
        best = { group = name, priority = priority }
      end
    end
  end
  if best then return best end
  local refusal = held and CODEUSED or INVALIDCODE
  return nil, redis.error_reply(refusal)
end

local function spend_code(granted, code)
  local spent = redis.call('HINCRBY', ROOM_PREFIX .. CODES_KEY .. granted.group, code, 1)
  if spent == 1 then redis.call('HINCRBY', K_GROUPS_USED, granted.group, 1) end
end

-- Puts `visitor` at the back of their priority's level and tells every
-- node (everyone behind moves back one); `from`: their order in the
-- general line, if they waited there. Before the opening they are drawn
-- among their priority's code holders (j.key their draw key for the new
-- entry j.entry; the caller checked the seed).
local function enter_priority(j, visitor, granted, joined, from)
  local score, member
  if not opened(room, now) then
    score, member = granted.priority * LEVEL, j.key .. ':' .. visitor
    redis.call('ZADD', K_PENTRIES, granted.priority, j.key .. ':' .. j.entry)
    redis.call('HSET', K_VISITORS, visitor, 'r|' .. granted.group .. '|' .. granted.priority .. '|'
      .. j.key .. '|' .. j.entry .. '|' .. joined)
  else
    local seq = redis.call('HINCRBY', K_ROOM, 'pseq:' .. granted.priority, 1)
    score, member = granted.priority * LEVEL + seq, visitor
    redis.call('HSET', K_VISITORS, visitor,
      'q|' .. granted.group .. '|' .. granted.priority .. '|' .. seq .. '|' .. joined)
  end
  redis.call('ZADD', K_PRIO, string.format('%.0f', score), member)
  redis.call('ZADD', K_SEEN, now, visitor)
  local version = num(room, 'version') + 1
  redis.call('HSET', K_ROOM, 'version', version)
  room.version = version
  waiting = nil
  publish(room_event('entered', room, { visitor = visitor, order = priority_order(score, member),
    from = from or '', group = granted.group, position = redis.call('ZRANK', K_PRIO, member) + 1 }))
end

local function turn_away(refusal)
  redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
  return redis.error_reply(refusal)
end

-- A join's place, or its refusal. Whatever it writes to the room's hash it
-- writes to `room` too, for the joins after it in this call.
local function join(j)
  local visitor, user, code = j.visitor, j.user, j.code
  -- A known user's or a code's join reads more than its own record.
  if pending[visitor] or user ~= '' or code ~= '' then flush() end
  -- The sequence number of a new place at the back of the general line,
  -- once made.
  local back_of_line
  if user ~= '' then
    -- One place per user: the user's live place, whichever visitor asks.
    local held = redis.call('HGET', K_USERS, user)
    local held_record = held and current_record(held, now)
    local held_kind = held_record and string.sub(held_record, 1, 1)
    if held_kind == 'w' or held_kind == 'd' or held_kind == 'q' or held_kind == 'r'
      or held_kind == 'a' then
      visitor = held
    end
  elseif room.user_required == '1' then
    return redis.error_reply(USERREQUIRED)
  end
  local record = current_record(visitor, now)
  local kind = record and string.sub(record, 1, 1)
  if kind == 'w' or kind == 'd' then
    mark_present(visitor, now)
    -- A code moves a visitor of the general line ahead.
    if code ~= '' then
      local granted, refusal = check_code(code)
      if not granted then return refusal end
      if not opened(room, now) and (j.commitment == '' or j.commitment ~= room.draw_commitment) then
        return redis.error_reply(DRAWSEED)
      end
      spend_code(granted, code)
      local from = unqueue(room, visitor, record, now)
      enter_priority(j, visitor, granted, tonumber(string.match(record, '|(%d+)$')), tostring(from))
    end
  elseif kind == 'q' or kind == 'r' then
    -- In the priority line already: a code spends nothing.
    mark_present(visitor, now)
  elseif kind ~= 'a' and sold_out(room) then
    -- Sold out: new arrivals are told so, and take nothing.
    local out = place(room, visitor, now, summary())
    out.state, out.visitor = 'c', visitor
    return cjson.encode(out)
  elseif kind ~= 'a' and in_networks(room.bypass_match, j.address) then
    local closes_at = tonumber(room.closes_at or '')
    if closes_at and now >= closes_at then return turn_away(NOTACCEPTING) end
    admit_bypassed(room, visitor, now)
  elseif kind ~= 'a' then
    local pre_queue = not opened(room, now)
    if pre_queue and (j.commitment == '' or j.commitment ~= room.draw_commitment) then
      return redis.error_reply(DRAWSEED)
    end
    local granted
    if code ~= '' then
      local refusal
      granted, refusal = check_code(code)
      if not granted then return refusal end
    elseif room.code_required == '1' then
      return redis.error_reply(CODEREQUIRED)
    end
    local closes_at = tonumber(room.closes_at or '')
    if queue_method(room) == 'reject' or (closes_at and now >= closes_at) then
      return turn_away(NOTACCEPTING)
    end
    local pow = tonumber(room.pow_difficulty or '0') > 0
    if pow then
      if j.pow_until == '' then return turn_away(POWREQUIRED) end
      if tonumber(j.pow_difficulty) < tonumber(room.pow_difficulty) then return turn_away(POWTOOEASY) end
      if redis.call('EXISTS', ROOM_PREFIX .. POW_KEY .. j.pow_id) == 1 then return turn_away(POWREUSED) end
    end
    if j.per_minute ~= '' then
      -- GCRA, as in src/words/join_limit.rs: a minute's worth at once, then
      -- one per interval; a refused join changes nothing but the count.
      local per_minute = math.max(1, tonumber(j.per_minute))
      local interval = math.ceil(JOIN_LIMIT_WINDOW_MS / per_minute)
      local burst = interval * (per_minute - 1)
      local limit_key = ROOM_PREFIX .. JOIN_LIMIT_KEY .. j.client
      local tat = math.max(tonumber(redis.call('GET', limit_key) or now), now)
      if tat - now > burst then
        return turn_away(RATELIMITED .. ' ' .. math.max(1, math.ceil((tat - now - burst) / 1000)))
      end
      redis.call('SET', limit_key, tat + interval, 'PX', tat + interval - now)
    end
    if pow then
      redis.call('SET', ROOM_PREFIX .. POW_KEY .. j.pow_id, '1', 'PX', math.max(1, tonumber(j.pow_until) - now))
    end
    if granted then spend_code(granted, code) end
    local tokens = num(room, 'tokens')
    local through = queue_method(room) == 'passthrough'
      or (tokens > 0 and waiting_now() == 0 and under_cap(room))
    if pre_queue and not granted then
      redis.call('ZADD', K_DRAW, 0, j.key .. ':' .. visitor)
      redis.call('ZADD', K_ENTRIES, 0, j.key .. ':' .. j.entry)
      redis.call('ZADD', K_SEEN, now, visitor)
      redis.call('HSET', K_VISITORS, visitor, 'd|' .. j.key .. '|' .. j.entry .. '|' .. now)
      waiting = nil
    elseif not pre_queue and room.paused ~= '1' and through then
      admit(room, visitor, now)
      room.tokens, room.admitted_total = math.max(0, tokens - 1), num(room, 'admitted_total') + 1
      redis.call('HSET', K_ROOM, 'tokens', room.tokens, 'admitted_total', room.admitted_total)
      record_admissions(now, 1)
    elseif granted then
      enter_priority(j, visitor, granted, now)
    else
      local count = waiting_now()
      local seq = num(room, 'next_seq') + 1
      room.next_seq = seq
      back_of_line = seq
      local record = 'w|' .. seq .. '|' .. now
      pending[visitor], pending_count = record, pending_count + 1
      table.insert(line_adds, seq)
      table.insert(line_adds, visitor)
      table.insert(seen_adds, now)
      table.insert(seen_adds, visitor)
      table.insert(record_sets, visitor)
      table.insert(record_sets, record)
      waiting = count + 1
    end
  end
  if user ~= '' then
    redis.call('HSET', K_USERS, user, visitor)
    redis.call('HSET', K_USER_OF, visitor, user)
  end
  if back_of_line then
    -- The commonest join: a new place at the back of the general line. Its
    -- position is everyone waiting, and its answer is the shared JSON with
    -- the few values of its own (`WirePlace`, as place() would make it).
    local facts_json, tail = shared_json()
    -- A visitor id is hex: quoted, a JSON string as it is.
    return '{"state":"w","order":"' .. back_of_line .. '","position":' .. waiting .. ',"visitor":"'
      .. visitor .. '","line":{"version":' .. room.version .. ',"waiting":' .. waiting
      .. tail .. ',"facts":' .. facts_json .. '}'
  end
  local out = place(room, visitor, now, summary())
  out.visitor = visitor
  return cjson.encode(out)
end

local replies = {}
for i = 1, #ARGV - 2 do
  local reply = join(read_join(i))
  -- A refusal is the join's alone: an error inside the array would fail
  -- the whole call in the client.
  if type(reply) == 'table' then reply = JOIN_REFUSED .. string.gsub(reply.err, '^%-', '') end
  replies[i] = reply
end
flush()
return replies
