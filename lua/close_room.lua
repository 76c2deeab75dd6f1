-- Closes a room: its line and visitors are dropped, the record stays as a
-- tombstone, and its ledger is kept for its report. ARGV[3]: how long (ms);
-- ARGV[4]: the room's sale as the report shows it (JSON), or ''.
-- The node applies a due schedule itself (see schedule_applies).
schedule_applies = false
local room = load_room()
if not room or room.closed == '1' then return redis.error_reply(NOROOM) end
ledger().close(room, now_ms(), tonumber(ARGV[3]), ARGV[4])
-- UNLINK: a draw of a million entrants is freed in the background.
redis.call('UNLINK', K_LINE, K_SEEN, K_VISITORS, K_ACTIVE, K_ADMISSIONS, K_ARRIVALS, K_USERS,
  K_DRAW, K_ENTRIES, K_USER_OF, K_BYPASSED, K_PRIO, K_PENTRIES, TUNE_KEYS.schedule, TUNE_KEYS.samples,
  TUNE_KEYS.changes, notes.key, notes.outbox, notes.near.p, notes.near.d, notes.near.l)
redis.call('HSET', K_ROOM, 'closed', '1')
publish(room_event('closed'))
return 1
