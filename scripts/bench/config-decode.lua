-- The cost of decoding a room's config in a script: cjson.decode of the
-- JSON value (ARGV[1]) and cmsgpack.unpack of the same config, ARGV[2]
-- times each; answers the microseconds per decode of each and the sizes.
-- Usage: see BENCHMARKS.md, "Issue 41: the config as one value".
local n = tonumber(ARGV[2])
local t0 = redis.call('TIME')
for i = 1, n do local c = cjson.decode(ARGV[1]) end
local t1 = redis.call('TIME')
local j0 = redis.call('TIME')
local packed = cmsgpack.pack(cjson.decode(ARGV[1]))
local m0 = redis.call('TIME')
for i = 1, n do local c = cmsgpack.unpack(packed) end
local m1 = redis.call('TIME')
local us = function(a, b) return (tonumber(b[1]) - tonumber(a[1])) * 1000000 + tonumber(b[2]) - tonumber(a[2]) end
return {tostring(us(t0, t1) / n), tostring(us(m0, m1) / n), #ARGV[1], #packed}
