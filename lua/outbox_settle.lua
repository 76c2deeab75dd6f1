-- Events delivered or given up leave the outbox. ARGV[3]: their entries,
-- space-separated; ARGV[4…]: visitors whose push subscription the push
-- service answered 404 or 410 for: it is dropped, and with no contact left
-- their request with it.
schedule_applies = false
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return redis.error_reply(CLOSED) end
local entries = {}
for entry in string.gmatch(ARGV[3], '%S+') do table.insert(entries, entry) end
if #entries > 0 and redis.call('EXISTS', notes.outbox) == 1 then
  redis.call('XACK', notes.outbox, OUTBOX_GROUP, unpack(entries))
  redis.call('XDEL', notes.outbox, unpack(entries))
end
for i = 4, #ARGV do
  local asked = notes.read(ARGV[i])
  if asked then
    asked.request.push = nil
    if asked.request.contact == nil or asked.request.contact == cjson.null then
      notes.forget(room, { ARGV[i] })
    else
      notes.write(ARGV[i], asked)
    end
  end
end
return 1
