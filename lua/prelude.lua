-- Generated from Rust's constants by src/store/redis/prelude.rs: do not edit.
local NOROOM = 'NOROOM'
local CLOSED = 'CLOSED'
local EXISTS = 'EXISTS'
local CONFLICT = 'CONFLICT'
local NOSALE = 'NOSALE'
local SOLDOUT = 'SOLDOUT'
local SEATTAKEN = 'SEATTAKEN'
local UNKNOWNSEAT = 'UNKNOWNSEAT'
local LIMIT = 'LIMIT'
local RATELIMITED = 'RATELIMITED'
local USERREQUIRED = 'USERREQUIRED'
local POWREQUIRED = 'POWREQUIRED'
local POWREUSED = 'POWREUSED'
local POWTOOEASY = 'POWTOOEASY'
local NOTACCEPTING = 'NOTACCEPTING'
local DRAWSEED = 'DRAWSEED'
local NODRAW = 'NODRAW'
local NOTDRAWN = 'NOTDRAWN'
local WRONGKIND = 'WRONGKIND'
local NOCLAIM = 'NOCLAIM'
local EXPIRED = 'EXPIRED'
local RELEASED = 'RELEASED'
local CONFIRMED = 'CONFIRMED'
local CODEREQUIRED = 'CODEREQUIRED'
local INVALIDCODE = 'INVALIDCODE'
local CODEUSED = 'CODEUSED'
local GROUPEXISTS = 'GROUPEXISTS'
local NOGROUP = 'NOGROUP'
local TOOMANYGROUPS = 'TOOMANYGROUPS'
local SCHEDULE_DUE = 'SCHEDULE_DUE'
local NOTWAITING = 'NOTWAITING'
local TOOMANYNOTIFY = 'TOOMANYNOTIFY'
local RESUMEUSED = 'RESUMEUSED'
local METHOD_FIFO = 'fifo'
local METHOD_RANDOM = 'random'
local METHOD_PASSTHROUGH = 'passthrough'
local METHOD_REJECT = 'reject'
local TURNED_RATE_LIMITED = 'rate_limited'
local TURNED_ROOM_NOT_ACCEPTING = 'room_not_accepting'
local TURNED_POW_REQUIRED = 'pow_required'
local TURNED_POW_INVALID = 'pow_invalid'
local CLAIM_HELD = 'held'
local CLAIM_CONFIRMED = 'confirmed'
local CLAIM_RELEASED = 'released'
local CLAIM_EXPIRED = 'expired'
local SALE_STOCK = 'stock'
local SALE_SEATS = 'seats'
local WANT_QUANTITY = 'quantity'
local WANT_SEATS = 'seats'
local ATTEMPT_RIGHT = 'right'
local ATTEMPT_WRONG = 'wrong'
local RATE_WINDOW_MS = 60000
local JOIN_LIMIT_WINDOW_MS = 60000
local CHUNK = 1000
local SWEEP_SLICE = 250
local SWEEP_AGAIN_MS = 25
local AWAY_REMEMBERED_MS = 3600000
local JOIN_REFUSED = '!'
local EVENT_FORMAT = 1
local ROOM_KEY = 'room'
local EVENTS_KEY = 'events'
local LEFT_KEY = 'left:'
local BYPASSED_KEY = 'bypassed'
local PRIORITY_KEY = 'priority'
local PRIORITY_ENTRIES_KEY = 'priority-entries'
local GROUPS_KEY = 'code-groups'
local GROUPS_USED_KEY = 'code-groups-used'
local CODES_KEY = 'codes:'
local JOIN_LIMIT_KEY = 'join-limit:'
local CODE_GUESSES_KEY = 'code-guesses:'
local POW_KEY = 'pow:'
local LEDGER_KEY = 'ledger:'
local MINUTES_KEY = 'minutes:'
local HOURS_KEY = 'hours:'
local REPORTS_KEY = 'reports'
local SCHEDULE_KEY = 'schedule'
local SAMPLES_KEY = 'health-samples'
local TUNE_CHANGES_KEY = 'tune-changes'
local NOTIFY_KEY = 'notify'
local NEAR_KEY = 'near:'
local NOTIFY_BLOCK_KEY = 'notify-block:'
local OUTBOX_KEY = 'outbox'
local OUTBOX_GROUP = 'senders'
local HELD_PRESENCE = 1000000000000000
local MAX_AHEAD = 1000
local SAMPLES_KEPT = 60
local CHANGES_KEPT = 100
local CHANGES_SHOWN = 20
local SAMPLE_EVERY_MS = 1000
local HEALTHY_TO_RAISE = 3
local NO_FAILURE = 'ok'
local TUNE_CUT = 'cut'
local TUNE_RAISED = 'raised'
local TUNE_HELD = 'held'
local TUNE_IDLE = 'idle'
local TUNED_DOWN = 'down'
local TUNED_UP = 'up'
local MINUTE_MS = 60000
local HOUR_MS = 3600000
local FOLD_AFTER_MS = 604800000
local WAIT_BOUNDS_MS = '1000 2000 5000 10000 30000 60000 120000 300000 600000 1200000 1800000 3600000 7200000'
local MAX_GROUPS = 100
local LOGIN_FAILURES = 10
local TABLE_CREATED = 'created'
local TABLE_CHANGED = 'changed'
local TABLE_UNCHANGED = 'unchanged'
local TABLE_STILL_CLOSED = 'still_closed'
-- The keys in the order the node sends them (src/store/redis/keys.rs).
local K_ROOM, K_LINE, K_SEEN, K_VISITORS, K_ACTIVE, K_ADMISSIONS, K_ARRIVALS, K_USERS, K_DRAW, K_ENTRIES, K_USER_OF =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
-- A join's values by name, from its argument (src/store/redis/join_batch.rs).
local JOIN_PATTERN = '^' .. string.rep('([^\n]*)\n', 13) .. '(.*)$'
local SHORT_JOIN = { visitor = '', fresh = '', per_minute = '', pow_until = '', commitment = '', entry = '', key = '', pow_difficulty = '', code = '', address = '', client = '', code_guesses = '', pow_id = '', user = '' }
local function read_join(packed)
  local short_visitor, short_fresh, short_address = string.match(packed, '^([^\n]*)\n?([^\n]*)\n?([^\n]*)$')
  if short_visitor then
    SHORT_JOIN.visitor, SHORT_JOIN.fresh, SHORT_JOIN.address = short_visitor, short_fresh, short_address
    return SHORT_JOIN
  end
  local visitor, fresh, per_minute, pow_until, commitment, entry, key, pow_difficulty, code, address, client, code_guesses, pow_id, user = string.match(packed, JOIN_PATTERN)
  return { visitor = visitor, fresh = fresh, per_minute = per_minute, pow_until = pow_until, commitment = commitment, entry = entry, key = key, pow_difficulty = pow_difficulty, code = code, address = address, client = client, code_guesses = code_guesses, pow_id = pow_id, user = user }
end
-- The records kept as one string each (src/store/redis/records.rs).
local function record_kind(record) return record and string.sub(record, 1, 1) end
local records = {
  waiting = { kind = 'w', fields = 2, write = function(seq, joined) return 'w|' .. seq .. '|' .. joined end,
    read = function(record) return string.match(record, '^w|([^|]*)|(.*)$') end },
  drawn = { kind = 'd', fields = 3, write = function(key, entry, joined) return 'd|' .. key .. '|' .. entry .. '|' .. joined end,
    read = function(record) return string.match(record, '^d|([^|]*)|([^|]*)|(.*)$') end },
  priority = { kind = 'q', fields = 4, write = function(group, priority, seq, joined) return 'q|' .. group .. '|' .. priority .. '|' .. seq .. '|' .. joined end,
    read = function(record) return string.match(record, '^q|([^|]*)|([^|]*)|([^|]*)|(.*)$') end },
  priority_drawn = { kind = 'r', fields = 5, write = function(group, priority, key, entry, joined) return 'r|' .. group .. '|' .. priority .. '|' .. key .. '|' .. entry .. '|' .. joined end,
    read = function(record) return string.match(record, '^r|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$') end },
  admitted = { kind = 'a', fields = 2, write = function(admitted_at, expires_at) return 'a|' .. admitted_at .. '|' .. expires_at end,
    read = function(record) return string.match(record, '^a|([^|]*)|(.*)$') end },
  group = { fields = 3, write = function(priority, uses, total) return priority .. '|' .. uses .. '|' .. total end,
    read = function(record) return string.match(record, '^([^|]*)|([^|]*)|(.*)$') end },
}
-- A place's states as answers name them (src/store/redis/replies.rs).
local STATE = { waiting = 'w', pre_queue = 'p', admitted = 'a', left = 'l', closed = 'c', expired = 'e', away = 'x', lapsed = 'i' }
