-- The consumer ARGV[3] is still at these events (ARGV[4…]: their entries),
-- retrying them: their idle time starts again, so nobody takes them over
-- yet. Answers the entries still its own, as a JSON list.
schedule_applies = false
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return redis.error_reply(CLOSED) end
local consumer = ARGV[3]
local held = {}
for i = 4, #ARGV do
  local pending = redis.call('XPENDING', notes.outbox, OUTBOX_GROUP, ARGV[i], ARGV[i], 1, consumer)
  if #pending > 0 then
    redis.call('XCLAIM', notes.outbox, OUTBOX_GROUP, consumer, 0, ARGV[i], 'JUSTID')
    table.insert(held, ARGV[i])
  end
end
if #held == 0 then return '[]' end
return cjson.encode(held)
