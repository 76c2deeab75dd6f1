-- Hands up to ARGV[5] events of the room's outbox to the consumer ARGV[3]
-- (a node), as words::rules::callbacks's claim: first those another has
-- held ARGV[4] ms or more without a word (it died: XAUTOCLAIM), then new
-- ones (XREADGROUP); each with how to reach its visitor now, read from
-- their request. An event whose place has ended is settled here instead
-- (nobody is left to call back). Answers a list of { entry, id, kind,
-- visitor, position, at, reach } as JSON.
schedule_applies = false
local room = load_room()
if not room then return redis.error_reply(NOROOM) end
if room.closed == '1' then return redis.error_reply(CLOSED) end
local consumer, takeover_ms, limit = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('EXISTS', notes.outbox) == 0 then return '[]' end
local out, ended = {}, {}
local function hand(entries)
  for _, entry in ipairs(entries) do
    -- An entry deleted meanwhile is a bare id (or false) in XAUTOCLAIM's answer.
    if type(entry) == 'table' and type(entry[2]) == 'table' then
      local fields = {}
      for i = 1, #entry[2], 2 do fields[entry[2][i]] = entry[2][i + 1] end
      local asked = notes.read(fields.visitor)
      if asked then
        table.insert(out, { entry = entry[1], id = fields.id, kind = fields.type, visitor = fields.visitor,
          position = tonumber(fields.position), at = tonumber(fields.at), reach = asked.request })
      else
        table.insert(ended, entry[1])
      end
    end
  end
end
local stale = redis.call('XAUTOCLAIM', notes.outbox, OUTBOX_GROUP, consumer, takeover_ms, '0-0', 'COUNT', limit)
hand(stale[2])
if #out + #ended < limit then
  local fresh = redis.call('XREADGROUP', 'GROUP', OUTBOX_GROUP, consumer, 'COUNT', limit - #out - #ended,
    'STREAMS', notes.outbox, '>')
  if fresh then hand(fresh[1][2]) end
end
if #ended > 0 then
  redis.call('XACK', notes.outbox, OUTBOX_GROUP, unpack(ended))
  redis.call('XDEL', notes.outbox, unpack(ended))
end
if #out == 0 then return '[]' end
return cjson.encode(out)
