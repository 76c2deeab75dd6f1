-- Shared by every sale script (prepended to each when loaded, after the
-- prelude of constants shared with Rust: src/store/redis/prelude.rs).
-- A script answers more than three values as JSON (src/store/redis/replies.rs).
-- KEYS: the room's sale keys, all under the hash tag wr:{room}, named K_SALE,
-- K_SEATS… by the prelude in the order src/store/redis/keys.rs sends them.
-- ARGV[1]: the time in ms, or '' for Redis server time; ARGV[2…]: the operation's own.

local function now_ms()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function split(text, separator)
  local parts = {}
  if text == '' then return parts end
  for part in string.gmatch(text, '([^' .. separator .. ']+)') do table.insert(parts, part) end
  return parts
end

-- A claim (a `claim` record, src/store/redis/records.rs): its seats
-- 'seat,seat', its hold's expiry and confirmation in ms, and its buyer,
-- whose units the per-user limit counts it in (K_UNITS): the visitor, or
-- 'u:<user>' for a known user's. A claim kept before its buyer was has one
-- field fewer: its buyer is its visitor.
local function load_claim(id)
  local record = redis.call('HGET', K_CLAIMS, id)
  if not record then return nil end
  if select(2, string.gsub(record, '|', '')) == records.claim.fields - 2 then record = record .. '|' end
  local visitor, state, quantity, seats, sequence, expires, confirmed, buyer = records.claim.read(record)
  if buyer == '' then buyer = visitor end
  return { visitor = visitor, state = state, quantity = tonumber(quantity), seats = seats,
    sequence = tonumber(sequence), expires = tonumber(expires), confirmed = confirmed, buyer = buyer }
end

local function save_claim(id, c)
  redis.call('HSET', K_CLAIMS, id,
    records.claim.write(c.visitor, c.state, c.quantity, c.seats, c.sequence, c.expires, c.confirmed, c.buyer))
end

-- A claim as the node reads it (`WireClaim`): seats 'seat,seat' ('' for a
-- quantity), confirmed '' or ms.
local function claim_reply(id, c)
  return { id = id, visitor = c.visitor, state = c.state, quantity = c.quantity, seats = c.seats,
    sequence = c.sequence, expires = c.expires, confirmed = c.confirmed }
end

-- What a claim held goes back to stock.
local function give_back(id, c, to_state)
  c.state = to_state
  save_claim(id, c)
  redis.call('ZREM', K_HOLDS, id)
  redis.call('HINCRBY', K_UNITS, c.buyer, -c.quantity)
  if c.seats == '' then
    redis.call('HINCRBY', K_SALE, 'stock_left', c.quantity)
  else
    for _, seat in ipairs(split(c.seats, ',')) do redis.call('HSET', K_SEATS, seat, '') end
  end
end

-- Holds past their expiry go back to stock, the soonest first, at most
-- `count` (SWEEP_SLICE when not given) per call: a mass expiry is given back
-- over several calls, never in one long script. Until the slice reaches
-- it, an expired hold still counts in the stock's figures (`held`, what is
-- left) and in a known user's limit on their other devices; the calls that
-- touch it settle it first (`settle`): its owner's confirm, release and
-- claims, a claim of its seat, a claim the stock would otherwise refuse.
local function expire_holds(now, count)
  local due = redis.call('ZRANGEBYSCORE', K_HOLDS, '-inf', now, 'LIMIT', 0, count or SWEEP_SLICE)
  for _, id in ipairs(due) do
    give_back(id, load_claim(id), CLAIM_EXPIRED)
  end
  return #due
end

-- Gives a claim's hold back if it has run out by `now`; the claim, as it now is.
local function settle(id, c, now)
  if c and c.state == CLAIM_HELD and c.expires <= now then give_back(id, c, CLAIM_EXPIRED) end
  return c
end

-- A visitor's claims ({ id, claim }), in the order made, each settled first.
local function settled_claims_of(visitor, now)
  local out = {}
  for _, id in ipairs(split(redis.call('HGET', K_MINE, visitor) or '', ',')) do
    table.insert(out, { id = id, claim = settle(id, load_claim(id), now) })
  end
  return out
end

local function require_sale()
  if redis.call('EXISTS', K_SALE) == 0 then return redis.error_reply(NOSALE) end
  return nil
end
