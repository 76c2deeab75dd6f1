-- Shared by every waitroom script (prepended to each when loaded, after the
-- prelude of constants shared with Rust: src/store/redis/prelude.rs).
-- KEYS: every key of one room, all under the hash tag wr:{room}, named
-- K_ROOM, K_LINE… by the prelude in the order src/store/redis/keys.rs sends them.
-- ARGV[1]: how to publish: 'PUBLISH', or 'SPUBLISH' on a cluster (a sharded
-- channel in the room's own slot), or '' to return the events instead (the
-- script then answers {reply, {event…}}, and the node publishes them once
-- the replicas have the write: --redis-wait-replicas); ARGV[2]: the time in
-- ms, or '' for Redis server time; ARGV[3…]: the operation's own arguments.
-- Each operation's script runs as the function `operation` (see
-- `script!` in src/store/redis/admission.rs), so this file's locals are its
-- upvalues: Lua 5.1 allows 60, keep them fewer.
-- A script answers more than three values as one JSON object (cjson), read
-- by a serde struct in src/store/redis/replies.rs.
-- K_DRAW holds the draw's entrants still waiting, K_ENTRIES every entrant
-- (frozen at the opening); both score 0 with members '<draw key hex>:<visitor>'
-- and '<draw key hex>:<entry>', so that their order (by member) is the draw's.
-- K_USERS maps known users to the visitor holding their place, K_USER_OF back.
local PUBLISH = ARGV[1]
-- wr:{room}:room -> wr:{room}:
local ROOM_PREFIX = string.sub(K_ROOM, 1, -#ROOM_KEY - 1)
local CHANNEL = ROOM_PREFIX .. EVENTS_KEY
-- Bypass networks' passes, outside the cap (score: expiry). Named, not
-- declared: its hash tag keeps it in the room's Cluster slot.
local K_BYPASSED = ROOM_PREFIX .. BYPASSED_KEY
-- The priority line (code holders) and the codes: named, not declared,
-- like life_key()'s (the hash tag keeps them in the room's slot). K_PRIO
-- scores priority * 2^32 + the level's join sequence number, members the
-- visitors; a code holder who joined before the opening is drawn: scored
-- priority * 2^32 (seq 0), member '<draw key hex>:<visitor>', so that
-- among equal scores the members' order is the draw's. K_PENTRIES lists the
-- code holders drawn ('<key hex>:<entry>', scored by priority), as K_ENTRIES
-- does everyone else. A waiting code holder's record is a `priority` one,
-- or drawn a `priority_drawn` one (src/store/redis/records.rs).
local K_PRIO, K_PENTRIES, K_GROUPS, K_GROUPS_USED =
  ROOM_PREFIX .. PRIORITY_KEY, ROOM_PREFIX .. PRIORITY_ENTRIES_KEY, ROOM_PREFIX .. GROUPS_KEY,
  ROOM_PREFIX .. GROUPS_USED_KEY
local LEVEL = 4294967296
-- The room's schedule (`Schedule::stored`'s JSON), autotune's health samples
-- ('<epoch> <latency> <failure>', the last SAMPLES_KEPT) and its changes (JSON,
-- the last CHANGES_KEPT): named, not declared, as K_BYPASSED.
local TUNE_KEYS = { schedule = ROOM_PREFIX .. SCHEDULE_KEY, samples = ROOM_PREFIX .. SAMPLES_KEY,
  changes = ROOM_PREFIX .. TUNE_CHANGES_KEY }
-- Whether an operation refuses to run while a schedule entry is due
-- (SCHEDULE_DUE: the node applies the entries, as words::schedule says,
-- and runs it again), so that the first operation at or after an entry's
-- time sees it (design rule 15). The scripts that write the config, or
-- read it for the node that applies them, set it false.
local schedule_applies = true

local DEFERRED = {}
local function publish(message)
  if PUBLISH == '' then
    table.insert(DEFERRED, message)
  else
    redis.call(PUBLISH, CHANNEL, message)
  end
end

local function now_ms()
  if ARGV[2] ~= '' then return tonumber(ARGV[2]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether an entry of the room's schedule is due at `now` (none is while
-- the room is closed or an operator's pause holds the schedule).
local function schedule_due(room, now)
  if room.closed == '1' or room.schedule_held == '1' then return false end
  local due = tonumber(room.next_change_at or '')
  return due ~= nil and now >= due
end

-- A room's config, as `StoredConfig` (src/store/redis/admission.rs)
-- writes it: the config's JSON, `null` read as absent, with what only the
-- scripts need (`opens_at_ms`, `closes_at_ms`, `bypass_match`).
local function read_config(json)
  local cfg = cjson.decode(json)
  for field, value in pairs(cfg) do
    if value == cjson.null then cfg[field] = nil end
  end
  return cfg
end

-- The room's record, its config as `room.cfg`.
local function load_room()
  local flat = redis.call('HGETALL', K_ROOM)
  if #flat == 0 then return nil end
  local room = {}
  for i = 1, #flat, 2 do room[flat[i]] = flat[i + 1] end
  room.cfg = read_config(room.config)
  if schedule_applies and schedule_due(room, now_ms()) then error({ err = SCHEDULE_DUE }) end
  return room
end

local function num(room, field) return tonumber(room[field]) end

local function open_room()
  local room = load_room()
  if not room then return nil, redis.error_reply(NOROOM) end
  if room.closed == '1' then return nil, redis.error_reply(CLOSED) end
  return room
end

-- `members` may be pairs (field/value, score/member): chunks stay even-sized.
local function chunked(command, key, members)
  for i = 1, #members, CHUNK do
    redis.call(command, key, unpack(members, i, math.min(i + CHUNK - 1, #members)))
  end
end

-- A key of one visitor's or one client address's (a departure, a join
-- budget, a used proof of work), named under the room's life ('life': one
-- more each time a room is made under its id, see make_room), so that
-- nothing a predecessor left under the id is read by its successor; Redis
-- drops each by its own expiry, so making a room again deletes none of
-- them (they are as many as the crowd). A room made before rooms had lives
-- names its keys without one. The scripts name these keys without
-- declaring them: the hash tag keeps them in the room's Cluster slot.
local function life_key(room, name, id)
  local life = room.life
  return ROOM_PREFIX .. name .. (life and (life .. ':') or '') .. id
end

-- Notifications (api.md, "Step away"), kept as words::rules::callbacks
-- keeps them. notes.key: visitor → { request (`NotifyRequest`'s JSON),
-- block, near_in ('p', 'd' or 'l': the part of the line where their
-- `near` is still to come), near_member, spent (the resume codes spent:
-- 'near,admitted,') } as JSON. notes.near: per part of the line (K_PRIO,
-- K_DRAW, K_LINE) those whose `near` is to come, scored and named as in
-- that part, so that the tick walks them in the line's order from its
-- head. notes.outbox: a Stream of events, handed to one node at a time by
-- its consumer group. A room nobody asked in pays one EXISTS where a
-- visitor is forgotten or a tick admits (design rule 13).
local notes = { key = ROOM_PREFIX .. NOTIFY_KEY, outbox = ROOM_PREFIX .. OUTBOX_KEY, parts = { 'p', 'd', 'l' },
  near = { p = ROOM_PREFIX .. NEAR_KEY .. 'p', d = ROOM_PREFIX .. NEAR_KEY .. 'd',
    l = ROOM_PREFIX .. NEAR_KEY .. 'l' } }

function notes.read(visitor)
  local raw = redis.call('HGET', notes.key, visitor)
  return raw and cjson.decode(raw)
end

function notes.write(visitor, asked)
  redis.call('HSET', notes.key, visitor, cjson.encode(asked))
end

-- The places of one client block holding a request (`--notify-per-ip`).
function notes.block_key(room, block)
  return life_key(room, NOTIFY_BLOCK_KEY, block)
end

-- Their `near` is not to come (sent, or they left the line).
function notes.unwatch(visitor, asked)
  if not asked.near_in then return false end
  redis.call('ZREM', notes.near[asked.near_in], asked.near_member)
  asked.near_in, asked.near_member = nil, nil
  return true
end

-- Drops what the visitors asked (cancelled, or their place ended): the
-- contact and the subscription go with it.
function notes.forget(room, visitors)
  if redis.call('EXISTS', notes.key) == 0 then return end
  for _, visitor in ipairs(visitors) do
    local asked = notes.read(visitor)
    if asked then
      notes.unwatch(visitor, asked)
      redis.call('HDEL', notes.key, visitor)
      redis.call('SREM', notes.block_key(room, asked.block), visitor)
    end
  end
end

-- Writes an event to the outbox; its id names the visitor and the kind.
function notes.send(kind, visitor, position, now)
  redis.call('XADD', notes.outbox, '*', 'id', visitor .. '-' .. kind, 'type', kind, 'visitor', visitor,
    'position', position or '', 'at', now)
end

-- Where a waiting place stands, as its part of the line names it: the part,
-- the member and its score.
function notes.spot(record, visitor)
  local kind = record_kind(record)
  if kind == records.waiting.kind then return 'l', visitor, redis.call('ZSCORE', K_LINE, visitor) end
  if kind == records.priority.kind then return 'p', visitor, redis.call('ZSCORE', K_PRIO, visitor) end
  if kind == records.drawn.kind then
    local key = records.drawn.read(record)
    return 'd', key .. ':' .. visitor, 0
  end
  local _, _, key = records.priority_drawn.read(record)
  local member = key .. ':' .. visitor
  return 'p', member, redis.call('ZSCORE', K_PRIO, member)
end

-- A waiting place moved (into the priority line): its `near` follows, and
-- the place stays kept while its visitor is away.
function notes.moved(visitor, part, member, score)
  if redis.call('EXISTS', notes.key) == 0 then return end
  local asked = notes.read(visitor)
  if not asked or not notes.unwatch(visitor, asked) then return end
  redis.call('ZADD', notes.near[part], score, member)
  asked.near_in, asked.near_member = part, member
  notes.write(visitor, asked)
  redis.call('ZADD', K_SEEN, HELD_PRESENCE, visitor)
end

-- The position of a member of notes.near[part], as place() counts it:
-- notes.position[part](member), nil for one no longer in line.
notes.position = {
  p = function(member)
    local rank = redis.call('ZRANK', K_PRIO, member)
    return rank and rank + 1
  end,
  d = function(member)
    local rank = redis.call('ZRANK', K_DRAW, member)
    return rank and redis.call('ZCARD', K_PRIO) + rank + 1
  end,
  l = function(member)
    local rank = redis.call('ZRANK', K_LINE, member)
    return rank and redis.call('ZCARD', K_PRIO) + redis.call('ZCARD', K_DRAW) + rank + 1
  end,
}

-- (On `notes`, as a field, because a script's locals from this file are
-- its upvalues, 60 at most: join.lua and notify.lua share it.)
-- GCRA, as in src/words/join_limit.rs: a minute's worth at once, then one
-- per interval. For the budget whose TAT `key` holds: the TAT to store if
-- this one is spent; or, past the budget, nil and the seconds to wait.
function notes.gcra(key, per_minute, now)
  per_minute = math.max(1, tonumber(per_minute))
  local interval = math.ceil(JOIN_LIMIT_WINDOW_MS / per_minute)
  local burst = interval * (per_minute - 1)
  local tat = math.max(tonumber(redis.call('GET', key) or now), now)
  if tat - now > burst then return nil, math.max(1, math.ceil((tat - now - burst) / 1000)) end
  return tat + interval
end

-- What the room keeps of visitors it forgets besides their records: their
-- requests to be notified, and their user mappings (a user's place goes
-- with its visitor; nothing to do in a room nobody joined as a known user).
local function forget_kept(room, visitors)
  notes.forget(room, visitors)
  if redis.call('EXISTS', K_USER_OF) == 0 then return end
  for _, visitor in ipairs(visitors) do
    local user = redis.call('HGET', K_USER_OF, visitor)
    if user then
      if redis.call('HGET', K_USERS, user) == visitor then redis.call('HDEL', K_USERS, user) end
      redis.call('HDEL', K_USER_OF, visitor)
    end
  end
end

-- A visitor who gave up a place or a pass is forgotten at once; a key of
-- their own ('wr:{room}:left:<life>:<visitor>', holding until when) says
-- `left` until then (at least abandon_after_s). The same key says `away`
-- ('x' and until when, mark_away) or that their session lapsed ('i' and
-- the pass's expiry, `lapsed`).
local function left_key(room, visitor)
  return life_key(room, LEFT_KEY, visitor)
end

-- Sessions whose pass has not run out but which lapsed for want of use
-- (session_idle_s): each is counted, and its visitor told so until the
-- pass's expiry by a departure key ('i' and that expiry, see left_key);
-- `lapses`: { visitor, expiry, … } pairs. As words::rules::room's end_pass.
local function lapsed(room, lapses, now)
  for i = 1, #lapses, 2 do
    local expires_at = lapses[i + 1]
    redis.call('SET', left_key(room, lapses[i]), 'i' .. expires_at, 'PX', expires_at - now)
  end
  if #lapses > 0 then
    room.sessions_lapsed = tostring(redis.call('HINCRBY', K_ROOM, 'sessions_lapsed', #lapses / 2))
  end
end

-- Passes past their end free their slot: the visitor is forgotten, a slice
-- at a time (a mass expiry is swept over several calls; meanwhile the cap
-- counts a pass until it is swept, never fewer). Bypass passes share the
-- slice. A pass's score is its end: its expiry, or with sessions on its
-- session's lapse if sooner; one that lapsed is counted (`lapsed`), and
-- one whose room has turned sessions off since is held until its expiry.
-- Whether the slice was full: more may be left.
local function expire_passes(now, room)
  local gone = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', now, 'LIMIT', 0, SWEEP_SLICE)
  local bypassed = {}
  if #gone < SWEEP_SLICE then
    bypassed = redis.call('ZRANGEBYSCORE', K_BYPASSED, '-inf', now, 'LIMIT', 0, SWEEP_SLICE - #gone)
  end
  local swept = #gone + #bypassed
  if swept == 0 then return false end
  local sessions = room.cfg.session_idle_s
  local ended, lapses = {}, {}
  for _, swept_set in ipairs({ { K_ACTIVE, gone }, { K_BYPASSED, bypassed } }) do
    local set, visitors = swept_set[1], swept_set[2]
    if #visitors > 0 then
      local kept, out = redis.call('HMGET', K_VISITORS, unpack(visitors)), {}
      for i, visitor in ipairs(visitors) do
        local _, expires_at = records.admitted.read(kept[i] or '')
        expires_at = tonumber(expires_at)
        if expires_at and expires_at > now and not sessions then
          redis.call('ZADD', set, 'XX', expires_at, visitor)
        else
          table.insert(out, visitor)
          if expires_at and expires_at > now then
            table.insert(lapses, visitor)
            table.insert(lapses, expires_at)
          end
        end
      end
      if #out > 0 then chunked('ZREM', set, out) end
      for _, visitor in ipairs(out) do table.insert(ended, visitor) end
    end
  end
  if #ended > 0 then
    chunked('HDEL', K_VISITORS, ended)
    chunked('ZREM', K_ARRIVALS, ended)
    forget_kept(room, ended)
    lapsed(room, lapses, now)
  end
  return swept == SWEEP_SLICE
end

-- When an admitted visitor's pass ends, as the cap counts it (its score).
local function held_until(visitor)
  return tonumber(redis.call('ZSCORE', K_ACTIVE, visitor) or redis.call('ZSCORE', K_BYPASSED, visitor) or '')
end

-- Whether an admitted visitor's record's pass is over at `now`: run out,
-- or (with sessions on) its session lapsed, as words::rules::room's
-- pass_over; and the pass's expiry.
local function pass_over(room, visitor, record, now)
  if record_kind(record) ~= records.admitted.kind then return false end
  local _, expires_at = records.admitted.read(record)
  expires_at = tonumber(expires_at)
  if expires_at <= now then return true, expires_at end
  if not room.cfg.session_idle_s then return false, expires_at end
  local ends = held_until(visitor)
  return ends ~= nil and ends <= now, expires_at
end

-- The visitor's record, after forgetting them if their pass is over and no
-- sweep has come to it yet (an operation on one visitor never waits for
-- the sweep).
local function current_record(room, visitor, now)
  local record = redis.call('HGET', K_VISITORS, visitor)
  local over, expires_at = pass_over(room, visitor, record, now)
  if not over then return record end
  redis.call('ZREM', K_ACTIVE, visitor)
  redis.call('ZREM', K_BYPASSED, visitor)
  redis.call('ZREM', K_ARRIVALS, visitor)
  redis.call('HDEL', K_VISITORS, visitor)
  forget_kept(room, { visitor })
  if expires_at > now then lapsed(room, { visitor, expires_at }, now) end
  return nil
end

local function depart(room, visitor, now, left_until)
  left_until = math.max(left_until, now + room.cfg.abandon_after_s * 1000)
  redis.call('HDEL', K_VISITORS, visitor)
  forget_kept(room, { visitor })
  redis.call('SET', left_key(room, visitor), left_until, 'PX', left_until - now)
end

-- A waiting visitor swept for being away: their departure key says so
-- ('x' and until when) for AWAY_REMEMBERED_MS, and Redis drops it by itself.
local function mark_away(room, visitor, now)
  redis.call('SET', left_key(room, visitor), 'x' .. (now + AWAY_REMEMBERED_MS), 'PX', AWAY_REMEMBERED_MS)
end

-- The room's arrival grace in ms, or nil when passes are never reclaimed.
local function arrival_grace_ms(room)
  local grace = room.cfg.arrival_grace_s
  return grace and grace * 1000
end

-- Takes back an admitted visitor's slot (`record` is theirs); their pass is
-- refused from now on, and they are told `left` while it would have run.
local function revoke(room, visitor, record, now)
  local _, expires_at = records.admitted.read(record)
  redis.call('ZREM', K_ACTIVE, visitor)
  redis.call('ZREM', K_BYPASSED, visitor)
  redis.call('ZREM', K_ARRIVALS, visitor)
  depart(room, visitor, now, tonumber(expires_at))
end

local function under_cap(room)
  if room.cfg.max_active == nil then return true end
  return redis.call('ZCARD', K_ACTIVE) < room.cfg.max_active
end

local function cap_room(room)
  if room.cfg.max_active == nil then return math.huge end
  return math.max(0, room.cfg.max_active - redis.call('ZCARD', K_ACTIVE))
end

-- Admissions are kept as "ms:count" entries over the rate window.
local function record_admissions(now, count)
  if count > 0 then
    local tail = redis.call('LINDEX', K_ADMISSIONS, -1)
    local at, n = nil, nil
    if tail then at, n = string.match(tail, '(%d+):(%d+)') end
    if at and tonumber(at) == now then
      redis.call('LSET', K_ADMISSIONS, -1, now .. ':' .. (tonumber(n) + count))
    else
      redis.call('RPUSH', K_ADMISSIONS, now .. ':' .. count)
    end
  end
  while true do
    local head = redis.call('LINDEX', K_ADMISSIONS, 0)
    if not head then break end
    local at = tonumber(string.match(head, '(%d+):'))
    if at + RATE_WINDOW_MS > now then break end
    redis.call('LPOP', K_ADMISSIONS)
  end
end

local function admitted_between(after, upto)
  local total = 0
  for _, entry in ipairs(redis.call('LRANGE', K_ADMISSIONS, 0, -1)) do
    local at, n = string.match(entry, '(%d+):(%d+)')
    at = tonumber(at)
    if at > after and at <= upto then total = total + tonumber(n) end
  end
  return total
end

-- A pass outside the cap for a bypass network's client: no token spent,
-- no admission counted in the rate, no arrival awaited.
-- A new pass's expiry, and its end as the cap counts it (its score): with
-- sessions on, its session's lapse (the idle clock starts at the
-- admission), as words::rules::room's pass_ends.
local function pass_ends(room, now)
  local expires_at = now + room.cfg.pass_ttl_s * 1000
  local idle = room.cfg.session_idle_s
  return expires_at, idle and math.min(now + idle * 1000, expires_at) or expires_at
end

local function admit_bypassed(room, visitor, now)
  local expires_at, ends = pass_ends(room, now)
  redis.call('HSET', K_VISITORS, visitor, records.admitted.write(now, expires_at))
  redis.call('ZADD', K_BYPASSED, ends, visitor)
  redis.call('HINCRBY', K_ROOM, 'bypassed', 1)
end

local function admit(room, visitor, now)
  local expires_at, ends = pass_ends(room, now)
  redis.call('HSET', K_VISITORS, visitor, records.admitted.write(now, expires_at))
  redis.call('ZADD', K_ACTIVE, ends, visitor)
  local grace = arrival_grace_ms(room)
  if grace then redis.call('ZADD', K_ARRIVALS, now + grace, visitor) end
  return expires_at
end

-- The rate a room's ticks admit at: admit_per_tick, or autotune's
-- (tune_effective), unless it only says what it would do (dry_run).
local function per_tick(room)
  local tune = room.cfg.autotune
  if tune and not tune.dry_run then
    return tonumber(room.tune_effective or '') or room.cfg.admit_per_tick
  end
  return room.cfg.admit_per_tick
end

-- The rate an ETA divides by: '' while paused or unknown.
-- As words::rules::pace: the configured rate (per_tick's) until a tick has
-- run a whole window after the pace last changed (rate_since), then the
-- achieved one.
local function rate(room)
  if room.cfg.paused then return '' end
  local ran = tonumber(room.last_tick_ran or '')
  local since = tonumber(room.rate_since or '') or num(room, 'created_at')
  if not ran or ran < since + RATE_WINDOW_MS then
    return tostring(per_tick(room) * 1000 / room.cfg.tick_ms)
  end
  if num(room, 'achieved_rate') > 0 then return room.achieved_rate end
  return ''
end

-- Whether the room is open: no opens_at, or it has passed.
local function opened(room, now)
  local at = room.cfg.opens_at_ms
  return at == nil or now >= at
end

-- Everyone waiting: the priority line, the draw's entrants, then the line.
local function waiting_count()
  return redis.call('ZCARD', K_PRIO) + redis.call('ZCARD', K_DRAW) + redis.call('ZCARD', K_LINE)
end

-- A place in the priority line as events carry it, from its score and
-- member: 'p<priority>-<seq>', or drawn 'p<priority>-0-<first 16 hex of
-- the draw key>'.
local function priority_order(score, member)
  local priority = math.floor(score / LEVEL)
  local key = string.match(member, '^(%x+):')
  if key then return string.format('p%.0f-0-', priority) .. string.sub(key, 1, 16) end
  return string.format('p%.0f-%.0f', priority, score - priority * LEVEL)
end

-- A waiting visitor's place in the order, as events carry it: the join
-- sequence number, or 'd<first 16 hex of the draw key>-<entry>'.
local function drawn_order(key, entry)
  return 'd' .. string.sub(key, 1, 16) .. '-' .. entry
end

-- Takes a waiting visitor's place out of the draw or the line; returns its
-- order. Before the opening an entrant who goes is no entrant at all.
local function unqueue(room, visitor, record, now)
  local kind = record_kind(record)
  if kind == records.priority.kind then
    local score = tonumber(redis.call('ZSCORE', K_PRIO, visitor))
    redis.call('ZREM', K_PRIO, visitor)
    return priority_order(score, visitor)
  end
  if kind == records.priority_drawn.kind then
    local _, _, key, entry = records.priority_drawn.read(record)
    local member = key .. ':' .. visitor
    local score = tonumber(redis.call('ZSCORE', K_PRIO, member))
    redis.call('ZREM', K_PRIO, member)
    if not opened(room, now) then redis.call('ZREM', K_PENTRIES, key .. ':' .. entry) end
    return priority_order(score, member)
  end
  if kind == records.drawn.kind then
    local key, entry = records.drawn.read(record)
    redis.call('ZREM', K_DRAW, key .. ':' .. visitor)
    if not opened(room, now) then redis.call('ZREM', K_ENTRIES, key .. ':' .. entry) end
    return drawn_order(key, entry)
  end
  redis.call('ZREM', K_LINE, visitor)
  return (records.waiting.read(record))
end

local function queue_method(room)
  return room.cfg.queue_method or METHOD_FIFO
end

local function sold_out(room)
  return room.sold_out == '1'
end

-- The line's summary, as places and events carry it (`WireLine`): rate,
-- tick_at ('' or ms) and paused ('1' or '0') as the room stores them.
-- `waiting`: everyone waiting, when the caller counted them already.
local function line(room, waiting)
  return { version = tonumber(room.version), waiting = waiting or waiting_count(), rate = tostring(rate(room)),
    tick_at = tostring(room.last_tick_ran or ''), paused = room.cfg.paused and '1' or '0' }
end

-- The room's facts, as places and `configured` events carry them
-- (`WireFacts`): stock_left '' without a sale, opens_at and closes_at '' or ms.
local function facts(room)
  return { queue_method = queue_method(room), stock_left = room.stock_left or '',
    sold_out = sold_out(room), opens_at = tostring(room.cfg.opens_at_ms or ''),
    target_url = room.cfg.target_url, notice = room.cfg.notice or '',
    abandon_after_s = room.cfg.abandon_after_s, closes_at = tostring(room.cfg.closes_at_ms or '') }
end

-- Whether a record's kind is a waiting place (the line, the draw, the
-- priority line, its draw).
local function waits(kind)
  return kind == records.waiting.kind or kind == records.drawn.kind or kind == records.priority.kind
    or kind == records.priority_drawn.kind
end

-- A visitor's place (`WirePlace`): its state (`STATE`: waiting, in the
-- pre-queue, admitted, left, closed, expired, or swept for being away) with
-- what it
-- has (the order, as events carry it, and the position; or the pass's
-- times), the line and the facts. `shared`: { line, facts } when the caller
-- read them already for many. Also returns the record's kind (nil for none).
local function place(room, visitor, now, shared)
  local record = redis.call('HGET', K_VISITORS, visitor)
  -- A pass that ran out is gone, swept or not; so is a lapsed session's.
  local over, expires_at = pass_over(room, visitor, record, now)
  if over then record = nil end
  local kind = record_kind(record)
  local out
  if over and expires_at > now then
    out = { state = STATE.lapsed, expires_at = expires_at }
  elseif not record then
    local departed = redis.call('GET', left_key(room, visitor)) or ''
    local away_until = tonumber(string.match(departed, '^x(%d+)$') or '')
    local lapsed_pass = tonumber(string.match(departed, '^i(%d+)$') or '')
    local departed_until = tonumber(departed)
    if away_until and away_until > now then
      out = { state = STATE.away }
    elseif lapsed_pass and lapsed_pass > now then
      out = { state = STATE.lapsed, expires_at = lapsed_pass }
    else
      out = { state = (departed_until and departed_until > now) and STATE.left or STATE.expired }
    end
  elseif waits(kind) and sold_out(room) then
    -- A line closed for a sold-out sale: its places stay, unused.
    out = { state = STATE.closed }
  elseif kind == records.drawn.kind then
    local key, entry = records.drawn.read(record)
    if opened(room, now) then
      out = { state = STATE.waiting, order = drawn_order(key, entry),
        position = redis.call('ZCARD', K_PRIO) + redis.call('ZRANK', K_DRAW, key .. ':' .. visitor) + 1 }
    else
      out = { state = STATE.pre_queue, order = drawn_order(key, entry) }
    end
  elseif kind == records.waiting.kind then
    out = { state = STATE.waiting, order = (records.waiting.read(record)),
      position = redis.call('ZCARD', K_PRIO) + redis.call('ZCARD', K_DRAW)
        + redis.call('ZRANK', K_LINE, visitor) + 1 }
  elseif kind == records.priority.kind then
    out = { state = STATE.waiting, order = priority_order(tonumber(redis.call('ZSCORE', K_PRIO, visitor)), visitor),
      position = redis.call('ZRANK', K_PRIO, visitor) + 1, priority = (records.priority.read(record)) }
  elseif kind == records.priority_drawn.kind then
    local group, _, key, entry = records.priority_drawn.read(record)
    local member = key .. ':' .. visitor
    if opened(room, now) then
      out = { state = STATE.waiting, order = priority_order(tonumber(redis.call('ZSCORE', K_PRIO, member)), member),
        position = redis.call('ZRANK', K_PRIO, member) + 1, priority = group }
    else
      out = { state = STATE.pre_queue, order = drawn_order(key, entry), priority = group }
    end
  elseif kind == records.admitted.kind then
    local admitted_at, expires_at = records.admitted.read(record)
    out = { state = STATE.admitted, admitted_at = tonumber(admitted_at), expires_at = tonumber(expires_at) }
  else
    out = { state = STATE.left }
  end
  if (out.state == STATE.waiting or out.state == STATE.pre_queue or out.state == STATE.admitted)
    and redis.call('HEXISTS', notes.key, visitor) == 1 then
    out.notify = true
  end
  shared = shared or { line = line(room), facts = facts(room) }
  out.line, out.facts = shared.line, shared.facts
  return out, kind
end

-- What a closed room's visitors are told, as place() tells it.
local function closed_place()
  return { state = STATE.closed, line = { version = 0, waiting = 0, rate = '', tick_at = '', paused = '0' },
    facts = { queue_method = METHOD_FIFO, stock_left = '', sold_out = false, opens_at = '',
      target_url = '', notice = '' } }
end

-- A room event as every node reads it (`WireEvent` in
-- src/store/redis/events.rs): JSON with the format's version `v`, the
-- kind, the line's summary (of `room`, when given) and what `fields` add.
-- An empty Lua table encodes as {}: the reader takes {} for an empty list.
local function room_event(kind, room, fields)
  local event = fields or {}
  event.v, event.kind = EVENT_FORMAT, kind
  if room then event.line = line(room) end
  return cjson.encode(event)
end

-- Marks a waiting visitor present (callers mark no one else). A new place at
-- the back of the line is not in the presence set until its visitor's first
-- sign of presence puts it there (see tick.lua's walk of the line).
-- GT: a place kept while its visitor is away (notes) keeps its later mark.
local function mark_present(visitor, now)
  redis.call('ZADD', K_SEEN, 'GT', now, visitor)
end

-- The room's ledger, for its report (src/words/report.rs, whose `Ledger`
-- the memory store keeps and this keeps alike): a hash of its own,
-- 'wr:{room}:ledger:<life>', with its rows in two lists beside it
-- ('minutes:<life>', 'hours:<life>'), named under the room's life so that a
-- room made again starts its own and the earlier ones stay, for
-- --report-keep-days after their close; 'wr:{room}:reports' lists the
-- lives (life → '<created_at>|<closed_at or empty>'). It counts what the
-- room's hash does not already: arrivals other than the line's
-- (`arrivals_other`: the draw's and the priority line's; the line's are its
-- sequence, next_seq, so the commonest join writes nothing more), admitted
-- from the line (`admitted`; those who passed straight through are the rest
-- of admitted_total), left, abandoned, revoked, turned away by code
-- ('turned:<code>'), the waits (`w`: each bucket's count, then the longest,
-- comma-separated) and the open row (`r_*`). At the close the room's own
-- fields are copied in (ledger.close), so the report outlives the room.
-- Made when a script first asks for it: every script runs this file's top
-- level on every call, and most calls (a join at the back of the line)
-- never use the ledger, so its functions are not made for them.
local ledger_made
local function ledger()
  if ledger_made then return ledger_made end
  local ledger = {}

  function ledger.key(room, name)
    return ROOM_PREFIX .. (name or LEDGER_KEY) .. (room.life or '0')
  end

  function ledger.add(room, field, n)
    if n > 0 then redis.call('HINCRBY', ledger.key(room), field, n) end
  end

  -- The report's code (`TURNED_…`) of a refusal that turns a visitor away,
  -- as words::report::TurnedAway::of.
  function ledger.why(refusal)
    if refusal == RATELIMITED then return TURNED_RATE_LIMITED end
    if refusal == NOTACCEPTING then return TURNED_ROOM_NOT_ACCEPTING end
    if refusal == POWREQUIRED then return TURNED_POW_REQUIRED end
    return TURNED_POW_INVALID
  end

  -- Waits as a table of BUCKETS counts then the longest, from their text.
  function ledger.waits(text)
    local w = {}
    for n in string.gmatch(text or '', '%d+') do table.insert(w, tonumber(n)) end
    if #w ~= #ledger.bounds() + 2 then
      w = {}
      for i = 1, #ledger.bounds() + 2 do w[i] = 0 end
    end
    return w
  end

  -- The buckets' bounds in ms, read from the prelude's text once a call.
  function ledger.bounds()
    if not ledger.bounds_ms then
      ledger.bounds_ms = {}
      for bound in string.gmatch(WAIT_BOUNDS_MS, '%d+') do table.insert(ledger.bounds_ms, tonumber(bound)) end
    end
    return ledger.bounds_ms
  end

  local function whole(n) return string.format('%.0f', n) end

  function ledger.text(w)
    local out = {}
    for i, n in ipairs(w) do out[i] = whole(n) end
    return table.concat(out, ',')
  end

  -- A row as words::report::Row::encode writes it.
  function ledger.row(at, span, arrivals, admitted, waiting, active, waits)
    return table.concat({ whole(at), whole(span), whole(arrivals), whole(admitted), whole(waiting),
      whole(active), waits }, '|')
  end

  -- Every place made so far: the line's sequence, the other arrivals, the
  -- bypassed, and those passed straight through (admitted_total less those
  -- admitted from the line). `l`: the ledger's fields.
  function ledger.arrivals(room, l)
    return (num(room, 'next_seq') or 0) + (tonumber(l.arrivals_other) or 0) + (num(room, 'bypassed') or 0)
      + (num(room, 'admitted_total') or 0) - (tonumber(l.admitted) or 0)
  end

  -- Folds the oldest hour of minute rows into an hour row once the oldest is
  -- past a week: an hour a call at most (60 rows), as words::report::Rows.
  function ledger.fold(room, now)
    local minutes = ledger.key(room, MINUTES_KEY)
    local first = redis.call('LINDEX', minutes, 0)
    if not first then return end
    local at = tonumber(string.match(first, '^(%d+)|'))
    if at + FOLD_AFTER_MS > now then return end
    local hour_at = at - at % HOUR_MS
    local arrivals, admitted, waiting, active, w, n = 0, 0, 0, 0, ledger.waits(nil), 0
    for _, row in ipairs(redis.call('LRANGE', minutes, 0, 59)) do
      local r_at, _, r_arr, r_adm, r_wait, r_act, r_w = string.match(row,
        '^(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|(.+)$')
      if tonumber(r_at) >= hour_at + HOUR_MS then break end
      n = n + 1
      arrivals, admitted = arrivals + tonumber(r_arr), admitted + tonumber(r_adm)
      waiting, active = tonumber(r_wait), tonumber(r_act)
      local rw = ledger.waits(r_w)
      for i = 1, #w - 1 do w[i] = w[i] + rw[i] end
      w[#w] = math.max(w[#w], rw[#rw])
    end
    redis.call('LTRIM', minutes, n, -1)
    redis.call('RPUSH', ledger.key(room, HOURS_KEY),
      ledger.row(hour_at, HOUR_MS, arrivals, admitted, waiting, active, ledger.text(w)))
  end

  -- A tick ran (not idle), as words::report::Ledger::tick: `waits` the ms each
  -- admission from the line waited, `abandoned` those it swept away,
  -- `waiting` and `active` the room after it. The open row closes when the
  -- minute has changed (kept unless nothing happened in it), and the rows
  -- past a week fold.
  function ledger.tick(room, now, waits, abandoned, waiting, active)
    local key = ledger.key(room)
    local flat, l = redis.call('HGETALL', key), {}
    for i = 1, #flat, 2 do l[flat[i]] = flat[i + 1] end
    local arrivals = ledger.arrivals(room, l)
    local minute = now - now % MINUTE_MS
    local r_at = tonumber(l.r_at)
    if not r_at or r_at < minute then
      local before = 0
      if r_at then
        local row_arrivals = arrivals - tonumber(l.r_before)
        local r_admitted, r_waiting, r_active = tonumber(l.r_admitted), tonumber(l.r_waiting), tonumber(l.r_active)
        if row_arrivals + r_admitted + r_waiting + r_active > 0 then
          redis.call('RPUSH', ledger.key(room, MINUTES_KEY),
            ledger.row(r_at, MINUTE_MS, row_arrivals, r_admitted, r_waiting, r_active, ledger.text(ledger.waits(l.r_w))))
        end
        before = arrivals
      end
      ledger.fold(room, now)
      l.r_at, l.r_before, l.r_admitted, l.r_w = minute, before, 0, nil
    end
    local fields = { 'r_at', whole(l.r_at), 'r_before', whole(l.r_before),
      'r_admitted', tonumber(l.r_admitted) + #waits, 'r_waiting', waiting, 'r_active', active }
    if abandoned > 0 then
      table.insert(fields, 'abandoned')
      table.insert(fields, (tonumber(l.abandoned) or 0) + abandoned)
    end
    -- The waits are read and written only by a tick that admitted.
    if #waits > 0 then
      local w, rw, bounds = ledger.waits(l.w), ledger.waits(l.r_w), ledger.bounds()
      for _, ms in ipairs(waits) do
        local i = 1
        while i <= #bounds and ms > bounds[i] do i = i + 1 end
        w[i], rw[i] = w[i] + 1, rw[i] + 1
        if ms > w[#w] then w[#w] = ms end
        if ms > rw[#rw] then rw[#rw] = ms end
      end
      for _, v in ipairs({ 'admitted', (tonumber(l.admitted) or 0) + #waits, 'w', ledger.text(w),
        'r_w', ledger.text(rw) }) do
        table.insert(fields, v)
      end
    elseif not l.r_w then
      table.insert(fields, 'r_w')
      table.insert(fields, ledger.text(ledger.waits(nil)))
    end
    redis.call('HSET', key, unpack(fields))
  end

  -- The room closes at `now`: its own fields, and `sale` (its sale as the
  -- report shows it), are copied into the ledger, which with its rows is kept
  -- `keep_ms` from now.
  function ledger.close(room, now, keep_ms, sale)
    local key = ledger.key(room)
    redis.call('HSET', key, 'sale', sale or '', 'closed_at', now, 'config', room.config, 'created_at', room.created_at,
      'next_seq', room.next_seq or 0, 'admitted_total', room.admitted_total or 0, 'bypassed', room.bypassed or 0,
      'no_shows', room.no_shows or 0, 'sessions_lapsed', room.sessions_lapsed or 0, 'peak_waiting', room.peak_waiting or 0,
      'draw_seed', room.draw_seed or '', 'draw_commitment', room.draw_commitment or '',
      'entrants', redis.call('ZCARD', K_ENTRIES) + redis.call('ZCARD', K_PENTRIES),
      'priority_entrants', redis.call('ZCARD', K_PENTRIES), 'opened', opened(room, now) and '1' or '0',
      'tune_effective', per_tick(room),
      'tune_changes', table.concat(redis.call('LRANGE', TUNE_KEYS.changes, 0, -1), '\n'))
    for _, name in ipairs({ LEDGER_KEY, MINUTES_KEY, HOURS_KEY }) do
      redis.call('PEXPIRE', ledger.key(room, name), keep_ms)
    end
    redis.call('HSET', ROOM_PREFIX .. REPORTS_KEY, room.life or '0', room.created_at .. '|' .. now)
  end

  -- A room is made at `now` under `life`: its ledger starts, and the list of
  -- lives forgets those whose ledger is gone (past --report-keep-days).
  function ledger.start(life, now)
    local reports = ROOM_PREFIX .. REPORTS_KEY
    local lives = redis.call('HKEYS', reports)
    for _, old in ipairs(lives) do
      if redis.call('EXISTS', ROOM_PREFIX .. LEDGER_KEY .. old) == 0 then redis.call('HDEL', reports, old) end
    end
    redis.call('HSET', ROOM_PREFIX .. LEDGER_KEY .. life, 'created_at', now)
    redis.call('HSET', reports, life, now .. '|')
  end

  ledger_made = ledger
  return ledger
end

-- Writes the room's schedule as the node made it: `plan` = { schedule
-- (`Schedule::stored`, '' for none), next_change_at (ms, or ''), held ('1', '0', or ''
-- to leave it: whether an operator's pause holds the schedule) }.
local function write_schedule(plan)
  if plan.schedule == '' then
    redis.call('DEL', TUNE_KEYS.schedule)
  else
    redis.call('SET', TUNE_KEYS.schedule, plan.schedule)
  end
  redis.call('HSET', K_ROOM, 'next_change_at', plan.next_change_at)
  if plan.held ~= '' then redis.call('HSET', K_ROOM, 'schedule_held', plan.held) end
end

-- Makes the room (replacing a closed one) with `config` (`StoredConfig`'s
-- JSON) and its schedule (`plan`, see write_schedule); `seed` and
-- `commitment` start its draw if it has an opens_at (or an entry sets one).
-- KEYS[12…]: the room's sale keys (same hash tag), so a room made again
-- under an old id starts with no sale, hold or order of its predecessor's.
-- Shared by create_room.lua and apply_table.lua.
local function make_room(seed, commitment, config, plan)
  local now = now_ms()
  local life = (tonumber(redis.call('HGET', K_ROOM, 'life')) or 0) + 1
  -- UNLINK: a draw of a million entrants is freed in the background.
  for _, group in ipairs(redis.call('HKEYS', K_GROUPS)) do
    redis.call('UNLINK', ROOM_PREFIX .. CODES_KEY .. group)
  end
  redis.call('UNLINK', K_ROOM, K_LINE, K_SEEN, K_VISITORS, K_ACTIVE, K_ADMISSIONS, K_ARRIVALS, K_USERS,
    K_DRAW, K_ENTRIES, K_USER_OF, K_BYPASSED, K_PRIO, K_PENTRIES, K_GROUPS, K_GROUPS_USED,
    TUNE_KEYS.schedule, TUNE_KEYS.samples, TUNE_KEYS.changes, notes.key, notes.outbox, notes.near.p,
    notes.near.d, notes.near.l)
  for i = 12, #KEYS do redis.call('UNLINK', KEYS[i]) end
  local cfg = read_config(config)
  redis.call('HSET', K_ROOM, 'config', config)
  if cfg.opens_at_ms or cfg.schedule_opens then
    redis.call('HSET', K_ROOM, 'draw_seed', seed, 'draw_commitment', commitment)
  end
  redis.call('HSET', K_ROOM, 'closed', '0', 'life', life, 'created_at', now, 'tokens', cfg.admit_per_tick,
    'last_tick', now, 'last_tick_ran', '', 'achieved_rate', '0', 'version', 0, 'next_seq', 0,
    'admitted_total', 0, 'config_rev', 0, 'turned_away', 0, 'no_shows', 0, 'peak_waiting', 0,
    'tune_effective', cfg.admit_per_tick, 'tune_epoch', 0, 'schedule_held', cfg.paused and '1' or '0')
  write_schedule(plan)
  ledger().start(life, now)
  return now
end

-- Autotune's rate after a change of the config from `before` to `after`
-- (as words::autotune's Tuning::configured): a new admit_per_tick (or
-- autotune newly set) starts it there, within autotune's bounds.
local function retune(room, before, after)
  local tune = after.autotune
  if not tune then
    redis.call('HSET', K_ROOM, 'tune_effective', after.admit_per_tick, 'tune_last', '')
    return
  end
  local effective = tonumber(room.tune_effective or '') or after.admit_per_tick
  if before.admit_per_tick ~= after.admit_per_tick or not before.autotune then
    effective = after.admit_per_tick
    redis.call('HSET', K_ROOM, 'tune_epoch', (tonumber(room.tune_epoch or '') or 0) + 1)
  end
  local max = tune.max_per_tick
  if max == cjson.null then max = after.admit_per_tick end
  effective = math.min(math.max(effective, tune.min_per_tick), max)
  redis.call('HSET', K_ROOM, 'tune_effective', effective)
end

-- Writes a whole new config (`StoredConfig`'s JSON) and its schedule
-- (`plan`, see write_schedule) over an open room and tells every node;
-- `seed` and `commitment` are taken if the room gets its first opens_at
-- (or an entry sets one: a draw's seed never changes). Shared by
-- configure.lua and apply_table.lua.
local function reconfigure(seed, commitment, config, plan)
  local function pace(cfg) return cfg.admit_per_tick .. '/' .. cfg.tick_ms .. '/' .. tostring(cfg.paused) end
  local before = load_room()
  local pace_before = pace(before.cfg)
  redis.call('HSET', K_ROOM, 'config', config)
  write_schedule(plan)
  local room = load_room()
  retune(before, before.cfg, room.cfg)
  room.tune_effective = redis.call('HGET', K_ROOM, 'tune_effective')
  if pace(room.cfg) ~= pace_before then
    -- ETAs use the configured rate for a window (see rate()).
    redis.call('HSET', K_ROOM, 'rate_since', now_ms())
  end
  if (room.cfg.opens_at_ms or room.cfg.schedule_opens) and (room.draw_seed or '') == '' then
    redis.call('HSET', K_ROOM, 'draw_seed', seed, 'draw_commitment', commitment)
  end
  if not room.cfg.close_when_sold_out then
    redis.call('HSET', K_ROOM, 'sold_out', '0')
    room.sold_out = '0'
  end
  redis.call('HSET', K_ROOM, 'config_rev', num(room, 'config_rev') + 1,
    'tokens', math.min(num(room, 'tokens'), per_tick(room)))
  publish(room_event('configured', room, { facts = facts(room) }))
end
