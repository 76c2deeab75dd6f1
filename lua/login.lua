-- An operator login attempt from one client block, counted for every node
-- (Store::login_attempt; the rule is src/words/login_limit.rs, whose
-- decide() this mirrors): GCRA as the join limit's, LOGIN_FAILURES a
-- minute with a minute's worth at once. A wrong token within the budget
-- spends one; past it every attempt, the right token included, is
-- refused. Run alone (the prelude, not lib.lua: no room).
-- KEYS[1]: the block's key (wr:login:{<block>}), holding its TAT and
-- expiring with it, so a block that stops trying leaves nothing.
-- ARGV[1]: the time in ms, or '' for Redis server time; ARGV[2]: 'wrong'
-- or 'right'.
-- Answers 0 (the attempt may go on), or the seconds until the block may
-- try again.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local interval = math.ceil(JOIN_LIMIT_WINDOW_MS / LOGIN_FAILURES)
local burst = interval * (LOGIN_FAILURES - 1)
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or now), now)
if tat - now > burst then return math.max(1, math.ceil((tat - now - burst) / 1000)) end
if ARGV[2] == ATTEMPT_WRONG then
  redis.call('SET', KEYS[1], tat + interval, 'PX', tat + interval - now)
end
return 0
