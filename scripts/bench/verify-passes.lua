-- /api/verify with another pass on every request, for wrk -s
-- (scripts/bench/verify-sessions.sh): the passes are read from the file
-- named after wrk's `--`, one a line, and taken in turn, so that each
-- pass's session is renewed as often as the rule lets it write.
local passes, next_pass = {}, 0

function init(args)
  for line in io.lines(args[1]) do
    passes[#passes + 1] = "Bearer " .. line
  end
  assert(#passes > 0, "no passes in " .. args[1])
end

function request()
  next_pass = next_pass % #passes + 1
  return wrk.format(nil, nil, { Authorization = passes[next_pass] })
end
