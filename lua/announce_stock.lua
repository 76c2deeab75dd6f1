-- What the room's sale has left, for every status; a sale sold out closes
-- the line when the room says so. ARGV[3]: units or seats free; ARGV[4]:
-- holds outstanding. Publishes only a change.
local room, err = open_room()
if not room then return err end
local left = ARGV[3]
local out = (tonumber(left) == 0 and tonumber(ARGV[4]) == 0 and room.cfg.close_when_sold_out)
  and '1' or '0'
if room.stock_left == left and (room.sold_out or '0') == out then return 0 end
redis.call('HSET', K_ROOM, 'stock_left', left, 'sold_out', out)
room.stock_left, room.sold_out = left, out
publish(room_event('configured', room, { facts = facts(room) }))
return 1
