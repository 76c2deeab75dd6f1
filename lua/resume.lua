-- Spends a visitor's resume code (a notification's link), as
-- words::rules::room's resume. ARGV[3]: the visitor; ARGV[4]: the event's
-- kind ('near' or 'admitted'). Answers the place (`WirePlace`), its
-- visitor present; RESUMEUSED if the code was spent.
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return cjson.encode(closed_place()) end
local now = now_ms()
expire_passes(now, room)
local visitor, kind = ARGV[3], ARGV[4]
local record = current_record(room, visitor, now)
local asked = record and notes.read(visitor)
if asked then
  if string.find(asked.spent, kind .. ',', 1, true) then return redis.error_reply(RESUMEUSED) end
  asked.spent = asked.spent .. kind .. ','
  notes.write(visitor, asked)
end
local out, found = place(room, visitor, now)
if waits(found) then mark_present(visitor, now) end
return cjson.encode(out)
