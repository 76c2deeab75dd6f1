-- Joins visitors to the line (or, before the opening, the draw), passes them
-- straight through, or returns their existing places: the joins a node
-- received while its last join call for the room was on its way, in one
-- call (see src/store/redis/join_batch.rs), each answered as it would be
-- alone. ARGV[3…]: one argument per join, read into `j` by the prelude's read_join.
-- Per join:
-- visitor: the visitor; fresh: '1' when the node made the visitor for this
-- join (a client without a ticket), so Redis keeps nothing of theirs yet;
-- per_minute: joins per minute per client address, or '' for no limit
-- (client: that address's block, whose key holds its TAT); user: the
-- known user, or ''; pow_until: until when the proof-of-work solution
-- holds (ms), or '' for none (pow_id: the
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
-- code_guesses: the client's budget of wrong codes, '<per minute> <block>', or
-- '' for none: a code refused as unknown or used spends one (the key
-- code-guesses:<block> holds its TAT); past it the code is not looked at.
-- address: the client's address ('4:' and 8 hex digits, '6:' and 32), or
-- '': a new arrival from the room's bypass_match networks is admitted at
-- once, outside the cap, whatever the bucket, pause, method or opening.
-- Answers what the call's places share, then one reply per join. What is
-- shared (JSON, `WireJoinShared`): the line's rate, tick time and pause and
-- the facts, which no join changes. A join's reply: a new place at the back
-- of the general line, the commonest by far, as three integers (its
-- sequence number, its position, the line's version: the shared part does
-- the rest, so neither Redis nor the node writes or reads the same JSON
-- for each), or as its sequence number alone when the other two follow
-- from it and the shared part's `back`; any other place as JSON (as
-- place() makes it) with `visitor`, whose place it is (a known user's
-- place may be another visitor's); or JOIN_REFUSED and the join's refusal
-- (code and detail).

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
expire_passes(now, room)
-- What no join changes, read once for the call.
local pre_queue, method, sold_out_now = not opened(room, now), queue_method(room), sold_out(room)
local closing = room.cfg.closes_at_ms
local closed_now = closing ~= nil and now >= closing
local pow_difficulty = room.cfg.pow_difficulty or 0
-- A number is made text at each use (Lua's concatenation, redis.call's
-- arguments): the time, used for every new place, is made text once.
local now_text = tostring(now)

-- The new places at the back of the general line this call made, written
-- together by flush(): one ZADD or HSET for them all instead of three
-- commands each. They are not put in the presence set: their visitors'
-- first sign of presence does that, and the tick walks the line for those
-- never seen (see tick.lua). Until then `pending` holds their records, and
-- anything that would read them from Redis (the same visitor again, a known
-- user, a code, a count of the line) flushes first.
local pending, pending_count = {}, 0
-- The position less the join number, and the line's version, of the
-- call's first new place at the back of the line: the places at the back
-- that share them are answered by their join number alone.
local back_run
local line_adds, record_sets = {}, {}
-- `...`: more of the room's fields to write with next_seq (the call's last
-- flush writes the peak of the line with it).
local function flush(...)
  if pending_count == 0 then
    if select('#', ...) > 0 then redis.call('HSET', K_ROOM, ...) end
    return
  end
  chunked('ZADD', K_LINE, line_adds)
  chunked('HSET', K_VISITORS, record_sets)
  redis.call('HSET', K_ROOM, 'next_seq', room.next_seq, ...)
  pending, pending_count = {}, 0
  line_adds, record_sets = {}, {}
end

-- The call's new places in the draw or the priority line, counted in the
-- room's ledger once at the end (those at the back of the line are its
-- sequence); and whether it made any place that waits (for the peak).
local other_arrivals, made_waiting = 0, false

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

-- The group that grants `code` (of those holding it, the first by priority,
-- then name, with a use left): its name and priority; or the refusal.
local function check_code(code)
  local groups = redis.call('HGETALL', K_GROUPS)
  local best, held = nil, false
  for i = 1, #groups, 2 do
    local name = groups[i]
    local priority, uses = records.group.read(groups[i + 1])
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

-- The refusal (its code, and a detail if any) counted in the stats and,
-- by code, in the room's ledger.
local function turn_away(refusal, detail)
  redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
  ledger().add(room, 'turned:' .. ledger().why(refusal), 1)
  if detail then refusal = refusal .. ' ' .. detail end
  return redis.error_reply(refusal)
end

-- check_code(j.code) while the client has code guesses left (j.code_guesses):
-- a code refused as unknown or used spends one; past the budget the code
-- is not looked at, right or wrong (RATELIMITED, turned away), so guessing
-- codes from one address gets a few tries a minute (see Door::guess).
local function guess_code(j)
  if j.code_guesses == '' then return check_code(j.code) end
  local per_minute, client = string.match(j.code_guesses, '^(%d+) (.+)$')
  local key = life_key(room, CODE_GUESSES_KEY, client)
  local spent, wait = notes.gcra(key, per_minute, now)
  if not spent then return nil, turn_away(RATELIMITED, wait) end
  local granted, refusal = check_code(j.code)
  if not granted then redis.call('SET', key, spent, 'PX', spent - now) end
  return granted, refusal
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
  if pre_queue then
    score, member = granted.priority * LEVEL, j.key .. ':' .. visitor
    redis.call('ZADD', K_PENTRIES, granted.priority, j.key .. ':' .. j.entry)
    redis.call('HSET', K_VISITORS, visitor,
      records.priority_drawn.write(granted.group, granted.priority, j.key, j.entry, joined))
  else
    local seq = redis.call('HINCRBY', K_ROOM, 'pseq:' .. granted.priority, 1)
    score, member = granted.priority * LEVEL + seq, visitor
    redis.call('HSET', K_VISITORS, visitor,
      records.priority.write(granted.group, granted.priority, seq, joined))
  end
  redis.call('ZADD', K_PRIO, string.format('%.0f', score), member)
  redis.call('ZADD', K_SEEN, now, visitor)
  notes.moved(visitor, 'p', member, string.format('%.0f', score))
  local version = num(room, 'version') + 1
  redis.call('HSET', K_ROOM, 'version', version)
  room.version = version
  waiting = nil
  publish(room_event('entered', room, { visitor = visitor, order = priority_order(score, member),
    from = from or '', group = granted.group, position = redis.call('ZRANK', K_PRIO, member) + 1 }))
end

-- A join's place, or its refusal. Whatever it writes to the room's hash it
-- writes to `room` too, for the joins after it in this call.
local function join(j)
  local visitor, user, code = j.visitor, j.user, j.code
  local again = pending[visitor]
  -- A known user's or a code's join reads more than its own record.
  if again or user ~= '' or code ~= '' then flush() end
  -- The sequence number of a new place at the back of the general line,
  -- once made.
  local back_of_line
  if user ~= '' then
    -- One place per user: the user's live place, whichever visitor asks.
    local held = redis.call('HGET', K_USERS, user)
    local held_record = held and current_record(room, held, now)
    local held_kind = record_kind(held_record)
    if held_kind and (waits(held_kind) or held_kind == records.admitted.kind) then
      visitor = held
    end
  elseif room.cfg.user_required then
    return redis.error_reply(USERREQUIRED)
  end
  -- A visitor the node made for this join (j.fresh) has no record to read,
  -- unless a known user's place answers for them or this call made theirs.
  local record
  if j.fresh == '' or visitor ~= j.visitor or again then record = current_record(room, visitor, now) end
  local kind = record_kind(record)
  if kind == records.waiting.kind or kind == records.drawn.kind then
    mark_present(visitor, now)
    -- A code moves a visitor of the general line ahead.
    if code ~= '' then
      local granted, refusal = guess_code(j)
      if not granted then return refusal end
      if pre_queue and (j.commitment == '' or j.commitment ~= room.draw_commitment) then
        return redis.error_reply(DRAWSEED)
      end
      spend_code(granted, code)
      local from = unqueue(room, visitor, record, now)
      local joined
      if kind == records.waiting.kind then
        joined = select(2, records.waiting.read(record))
      else
        joined = select(3, records.drawn.read(record))
      end
      enter_priority(j, visitor, granted, tonumber(joined), tostring(from))
    end
  elseif kind == records.priority.kind or kind == records.priority_drawn.kind then
    -- In the priority line already: a code spends nothing.
    mark_present(visitor, now)
  elseif kind ~= records.admitted.kind and sold_out_now then
    -- Sold out: new arrivals are told so, and take nothing.
    local out = place(room, visitor, now, summary())
    out.state, out.visitor = 'c', visitor
    return cjson.encode(out)
  elseif kind ~= records.admitted.kind and in_networks(room.cfg.bypass_match, j.address) then
    if closed_now then return turn_away(NOTACCEPTING) end
    admit_bypassed(room, visitor, now)
  elseif kind ~= records.admitted.kind then
    if pre_queue and (j.commitment == '' or j.commitment ~= room.draw_commitment) then
      return redis.error_reply(DRAWSEED)
    end
    local granted
    if code ~= '' then
      local refusal
      granted, refusal = guess_code(j)
      if not granted then return refusal end
    elseif room.cfg.code_required then
      return redis.error_reply(CODEREQUIRED)
    end
    if method == METHOD_REJECT or closed_now then
      return turn_away(NOTACCEPTING)
    end
    local pow = pow_difficulty > 0
    if pow then
      if j.pow_until == '' then return turn_away(POWREQUIRED) end
      if tonumber(j.pow_difficulty) < pow_difficulty then return turn_away(POWTOOEASY) end
      if redis.call('EXISTS', life_key(room, POW_KEY, j.pow_id)) == 1 then
        return turn_away(POWREUSED)
      end
    end
    if j.per_minute ~= '' then
      -- A refused join changes nothing but the count.
      local limit_key = life_key(room, JOIN_LIMIT_KEY, j.client)
      local spent, wait = notes.gcra(limit_key, j.per_minute, now)
      if not spent then return turn_away(RATELIMITED, wait) end
      redis.call('SET', limit_key, spent, 'PX', spent - now)
    end
    if pow then
      redis.call('SET', life_key(room, POW_KEY, j.pow_id), '1', 'PX', math.max(1, tonumber(j.pow_until) - now))
    end
    if granted then spend_code(granted, code) end
    local tokens = num(room, 'tokens')
    local through = method == METHOD_PASSTHROUGH
      or (tokens > 0 and waiting_now() == 0 and under_cap(room))
    if pre_queue and not granted then
      redis.call('ZADD', K_DRAW, 0, j.key .. ':' .. visitor)
      redis.call('ZADD', K_ENTRIES, 0, j.key .. ':' .. j.entry)
      redis.call('ZADD', K_SEEN, now, visitor)
      redis.call('HSET', K_VISITORS, visitor, records.drawn.write(j.key, j.entry, now))
      waiting = nil
      other_arrivals, made_waiting = other_arrivals + 1, true
    elseif not pre_queue and not room.cfg.paused and through then
      admit(room, visitor, now)
      room.tokens, room.admitted_total = math.max(0, tokens - 1), num(room, 'admitted_total') + 1
      redis.call('HSET', K_ROOM, 'tokens', room.tokens, 'admitted_total', room.admitted_total)
      record_admissions(now, 1)
    elseif granted then
      enter_priority(j, visitor, granted, now)
      other_arrivals, made_waiting = other_arrivals + 1, true
    else
      local count = waiting_now()
      local seq = num(room, 'next_seq') + 1
      room.next_seq = seq
      back_of_line = seq
      -- '%d' rather than tostring's '%.14g': the same text for a whole
      -- number below 10^14, made in half the time.
      local seq_text = string.format('%d', seq)
      local record = records.waiting.write(seq_text, now_text)
      pending[visitor], pending_count = record, pending_count + 1
      local n = pending_count * 2
      line_adds[n - 1], line_adds[n] = seq_text, visitor
      record_sets[n - 1], record_sets[n] = visitor, record
      waiting = count + 1
      made_waiting = true
    end
  end
  if user ~= '' then
    redis.call('HSET', K_USERS, user, visitor)
    redis.call('HSET', K_USER_OF, visitor, user)
  end
  if back_of_line then
    -- The commonest join: a new place at the back of the general line,
    -- whose position is everyone waiting. While its position less its
    -- join number, and the line's version, are those of the call's first
    -- such place (sent once, in the shared part), its join number alone.
    local version, offset = tonumber(room.version), waiting - back_of_line
    if not back_run then back_run = { offset, version } end
    if offset == back_run[1] and version == back_run[2] then return back_of_line end
    return { back_of_line, waiting, version }
  end
  local out = place(room, visitor, now, summary())
  out.visitor = visitor
  return cjson.encode(out)
end

local replies = {}
for i = 1, #ARGV - 2 do
  local reply = join(read_join(ARGV[2 + i]))
  -- A refusal is the join's alone: an error inside the array would fail
  -- the whole call in the client.
  if type(reply) == 'table' and reply.err then reply = JOIN_REFUSED .. string.gsub(reply.err, '^%-', '') end
  replies[i + 1] = reply
end
-- The line only grows within a call, so its peak is read once, at the end.
local peak = num(room, 'peak_waiting') or 0
if made_waiting and (waiting or waiting_now()) > peak then
  flush('peak_waiting', waiting)
else
  flush()
end
if other_arrivals > 0 then ledger().add(room, 'arrivals_other', other_arrivals) end
local line_now = line(room, 0)
replies[1] = cjson.encode({ rate = line_now.rate, tick_at = line_now.tick_at, paused = line_now.paused,
  facts = facts(room), back = back_run })
return replies
