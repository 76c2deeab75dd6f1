-- A visitor's place, read to check their pass (/api/verify, the gate, the
-- sale): an admitted visitor has arrived, so their pass is no longer
-- reclaimed as a no-show; and with sessions on, the call renews the
-- session of the pass it checks unless that lapsed, as
-- words::rules::room's arrive (the renewal's rule is
-- words::rules::passes::renewed_lapse's: a write at most once a tenth of
-- session_idle_s per pass). ARGV[3]: the visitor; ARGV[4]: the checked
-- pass's `exp` (seconds).
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return cjson.encode(closed_place()) end
local now = now_ms()
expire_passes(now, room)
local visitor = ARGV[3]
-- A pass over and not swept yet is ended here, as any call on its visitor does.
current_record(room, visitor, now)
redis.call('ZREM', K_ARRIVALS, visitor)
-- (The parentheses keep place()'s first value, the place.)
local out = (place(room, visitor, now))
local idle = room.cfg.session_idle_s
if idle and out.state == STATE.admitted and math.floor(out.expires_at / 1000) == tonumber(ARGV[4]) then
  idle = idle * 1000
  local set, lapse_at = K_ACTIVE, tonumber(redis.call('ZSCORE', K_ACTIVE, visitor) or '')
  if not lapse_at then set, lapse_at = K_BYPASSED, tonumber(redis.call('ZSCORE', K_BYPASSED, visitor) or '') end
  local latest = now + idle + math.floor(idle / 10)
  local to = math.min(latest, out.expires_at)
  if lapse_at and (lapse_at < now + idle or lapse_at > latest) and to ~= lapse_at then
    redis.call('ZADD', set, 'XX', to, visitor)
  end
end
return cjson.encode(out)
