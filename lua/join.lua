-- Joins the line (or, before the opening, the draw), passes straight through,
-- or returns the existing place.
-- ARGV[3]: the visitor; ARGV[4]: joins per minute per client address, or ''
-- for no limit (KEYS[12] is that address's key, its TAT); ARGV[5]: the known
-- user, or ''; ARGV[6]: until when the proof-of-work solution holds (ms), or
-- '' for none (KEYS[13] marks it used), and ARGV[10] the difficulty its
-- challenge was made at. Both keys are in the room's slot.
-- ARGV[7]: the commitment of the seed the node drew ARGV[9] (the draw key,
-- hex) for ARGV[8] (a new entry id) with, or '': Lua has no HMAC, so the
-- node makes the key; a node without the room's seed is told 'DRAWSEED'.
-- ARGV[11]: the SHA-256 (hex) of the join's priority code, or '': a valid
-- one puts a new place (or one waiting in the general line) in the
-- priority line and spends one use, here, so one use makes one place
-- whichever node asks.
-- ARGV[12]: the client's address ('4:' and 8 hex digits, '6:' and 32), or
-- '': a new arrival from the room's bypass_match networks is admitted at
-- once, outside the cap, whatever the bucket, pause, method or opening.
-- Returns the place (JSON, as place() makes it) with `visitor`, whose place
-- it is (a known user's place may be another visitor's).
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
-- The record of a new place at the back of the general line, once made.
local back_of_line
expire_passes(now)
local visitor = ARGV[3]
local user = ARGV[5]
local code = ARGV[11]

-- The group that grants `code` (of those holding it, the first by priority,
-- then name, with a use left): its name and priority; or the refusal.
local function check_code()
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

local function spend_code(granted)
  local spent = redis.call('HINCRBY', ROOM_PREFIX .. CODES_KEY .. granted.group, code, 1)
  if spent == 1 then redis.call('HINCRBY', K_GROUPS_USED, granted.group, 1) end
end

-- Puts the visitor at the back of their priority's level and tells every
-- node (everyone behind moves back one); `from`: their order in the
-- general line, if they waited there.
-- general line, if they waited there. Before the opening they are drawn
-- among their priority's code holders (ARGV[9] their draw key for the new
-- entry ARGV[8]; the caller checked the seed).
local function enter_priority(granted, joined, from)
  local score, member
  if not opened(room, now) then
    local key, entry = ARGV[9], ARGV[8]
    score, member = granted.priority * LEVEL, key .. ':' .. visitor
    redis.call('ZADD', K_PENTRIES, granted.priority, key .. ':' .. entry)
    redis.call('HSET', K_VISITORS, visitor, 'r|' .. granted.group .. '|' .. granted.priority .. '|'
      .. key .. '|' .. entry .. '|' .. joined)
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
  publish(room_event('entered', room, { visitor = visitor, order = priority_order(score, member),
    from = from or '', group = granted.group, position = redis.call('ZRANK', K_PRIO, member) + 1 }))
end

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
    local granted, refusal = check_code()
    if not granted then return refusal end
    if not opened(room, now) and (ARGV[7] == '' or ARGV[7] ~= room.draw_commitment) then
      return redis.error_reply(DRAWSEED)
    end
    spend_code(granted)
    local from = unqueue(room, visitor, record, now)
    enter_priority(granted, tonumber(string.match(record, '|(%d+)$')), tostring(from))
  end
elseif kind == 'q' or kind == 'r' then
  -- In the priority line already: a code spends nothing.
  mark_present(visitor, now)
elseif kind ~= 'a' and sold_out(room) then
  -- Sold out: new arrivals are told so, and take nothing.
  local out = place(room, visitor, now)
  out.state, out.visitor = 'c', visitor
  return cjson.encode(out)
elseif kind ~= 'a' and in_networks(room.bypass_match, ARGV[12]) then
  local closes_at = tonumber(room.closes_at or '')
  if closes_at and now >= closes_at then
    redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
    return redis.error_reply(NOTACCEPTING)
  end
  admit_bypassed(room, visitor, now)
elseif kind ~= 'a' then
  local pre_queue = not opened(room, now)
  if pre_queue and (ARGV[7] == '' or ARGV[7] ~= room.draw_commitment) then
    return redis.error_reply(DRAWSEED)
  end
  local granted
  if code ~= '' then
    local refusal
    granted, refusal = check_code()
    if not granted then return refusal end
  elseif room.code_required == '1' then
    return redis.error_reply(CODEREQUIRED)
  end
  local closes_at = tonumber(room.closes_at or '')
  if queue_method(room) == 'reject' or (closes_at and now >= closes_at) then
    redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
    return redis.error_reply(NOTACCEPTING)
  end
  local pow = tonumber(room.pow_difficulty or '0') > 0
  if pow then
    local refusal
    if ARGV[6] == '' then refusal = POWREQUIRED
    elseif tonumber(ARGV[10]) < tonumber(room.pow_difficulty) then refusal = POWTOOEASY
    elseif redis.call('EXISTS', KEYS[13]) == 1 then refusal = POWREUSED end
    if refusal then
      redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
      return redis.error_reply(refusal)
    end
  end
  if ARGV[4] ~= '' then
    -- GCRA, as in src/words/join_limit.rs: a minute's worth at once, then
    -- one per interval; a refused join changes nothing but the count.
    local per_minute = math.max(1, tonumber(ARGV[4]))
    local interval = math.ceil(JOIN_LIMIT_WINDOW_MS / per_minute)
    local burst = interval * (per_minute - 1)
    local tat = math.max(tonumber(redis.call('GET', KEYS[12]) or now), now)
    if tat - now > burst then
      redis.call('HINCRBY', K_ROOM, 'turned_away', 1)
      return redis.error_reply(RATELIMITED .. ' ' .. math.max(1, math.ceil((tat - now - burst) / 1000)))
    end
    redis.call('SET', KEYS[12], tat + interval, 'PX', tat + interval - now)
  end
  if pow then
    redis.call('SET', KEYS[13], '1', 'PX', math.max(1, tonumber(ARGV[6]) - now))
  end
  if granted then spend_code(granted) end
  local tokens = num(room, 'tokens')
  local through = queue_method(room) == 'passthrough'
    or (tokens > 0 and waiting_count() == 0 and under_cap(room))
  if pre_queue and not granted then
    local key, entry = ARGV[9], ARGV[8]
    redis.call('ZADD', K_DRAW, 0, key .. ':' .. visitor)
    redis.call('ZADD', K_ENTRIES, 0, key .. ':' .. entry)
    redis.call('ZADD', K_SEEN, now, visitor)
    redis.call('HSET', K_VISITORS, visitor, 'd|' .. key .. '|' .. entry .. '|' .. now)
  elseif not pre_queue and room.paused ~= '1' and through then
    admit(room, visitor, now)
    redis.call('HSET', K_ROOM, 'tokens', math.max(0, tokens - 1),
      'admitted_total', num(room, 'admitted_total') + 1)
    record_admissions(now, 1)
  elseif granted then
    enter_priority(granted, now)
  else
    local seq = num(room, 'next_seq') + 1
    redis.call('HSET', K_ROOM, 'next_seq', seq)
    redis.call('ZADD', K_LINE, seq, visitor)
    redis.call('ZADD', K_SEEN, now, visitor)
    back_of_line = 'w|' .. seq .. '|' .. now
    redis.call('HSET', K_VISITORS, visitor, back_of_line)
  end
end
if user ~= '' then
  redis.call('HSET', K_USERS, user, visitor)
  redis.call('HSET', K_USER_OF, visitor, user)
end
local out
if back_of_line then
  -- The commonest join: a new place at the back of the general line. Its
  -- position is everyone waiting, which the line's summary counts anyway,
  -- so place() need not read the record just written nor rank it (the same
  -- answer in four fewer commands).
  local shared = { line = line(room), facts = facts(room) }
  out = { state = 'w', order = string.match(back_of_line, '^w|(%d+)|'), position = shared.line.waiting,
    line = shared.line, facts = shared.facts }
else
  out = place(room, visitor, now)
end
out.visitor = visitor
return cjson.encode(out)
