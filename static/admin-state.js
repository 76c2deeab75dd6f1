// Operator page model: the one state object admin.js keeps (its two refresh
// loops' failures and stops, the rooms that have no sale for now, each
// room's chart samples: the node's hour of history, then the page's own;
// and how far the node's clock is from this browser's) and the changes to
// it, with what a drop's figures say (where each schedule entry stands,
// whether a pause holds the schedule). Nothing here touches the DOM.

// A chart shows this much history: the node keeps an hour of it.
export const CHART_SPAN_MS = 60 * 60 * 1000;
// The page's own samples (one a second) are kept one per this much: the
// newest is replaced until then, so the chart's end is always current.
export const LIVE_SAMPLE_MS = 5000;

export function createAdminState() {
  return {
    failures: 0,        // room figure refreshes failed in a row
    stopped: false,     // the session expired: no more refreshes
    saleFailures: 0,
    saleStopped: false,
    noSaleUntil: {},    // room id -> when to ask again for a sale it lacked
    history: {},        // room id -> chart samples, oldest first
    offset: {}          // room id -> this browser's clock less the node's, ms
  };
}

function sampleOf(figures, at) {
  return {
    at,
    waiting: figures.waiting,
    active: figures.active,
    admitted_last_minute: figures.admitted_last_minute,
    max_active: typeof figures.max_active === 'number' ? figures.max_active : null
  };
}

function trim(samples, now) {
  while (samples.length && samples[0].at < now - CHART_SPAN_MS) samples.shift();
  return samples;
}

// Records one sample of a room's figures (its stats and `max_active`);
// returns the room's samples over the chart's span, oldest first.
export function recordSample(st, room, figures, now) {
  const samples = st.history[room] || (st.history[room] = []);
  const sample = sampleOf(figures, now);
  const last = samples[samples.length - 1];
  if (last && last.live && now - last.since < LIVE_SAMPLE_MS) {
    sample.since = last.since;
    samples[samples.length - 1] = sample;
  } else {
    sample.since = now;
    samples.push(sample);
  }
  sample.live = true;
  return trim(samples, now);
}

// Puts the node's history of a room (GET /api/admin/rooms/{room}/history)
// before the samples this page took itself, on this browser's clock:
// `answer.now` is the node's clock when it answered, `now` this browser's,
// so a node and a browser whose clocks differ still agree on "a minute ago".
export function seedHistory(st, room, answer, now) {
  const serverNow = Date.parse(answer && answer.now);
  const list = answer && Array.isArray(answer.samples) ? answer.samples : [];
  const live = (st.history[room] || []).filter((s) => s.live);
  const firstLive = live.length ? live[0].at : Infinity;
  const seeded = [];
  if (!isNaN(serverNow)) {
    st.offset[room] = now - serverNow;
    for (const s of list) {
      const at = now - (serverNow - Date.parse(s.at));
      if (isNaN(at) || at >= firstLive) continue;
      seeded.push(sampleOf(s, at));
    }
  }
  st.history[room] = trim(seeded.concat(live), now);
  return st.history[room];
}

// Whether a room's sale is due to be asked for (rooms without one are
// asked only every few seconds).
export function saleCheckDue(st, room, now) {
  return !(st.noSaleUntil[room] && now < st.noSaleUntil[room]);
}

export function noteNoSale(st, room, now, recheckMs) {
  st.noSaleUntil[room] = now + recheckMs;
}

export function noteSale(st, room) {
  delete st.noSaleUntil[room];
}

// Notes the node's clock as it made the page (`data-server-now`, RFC 3339)
// for a room whose history has not said it yet.
export function noteServerNow(st, room, serverNow, now) {
  const at = Date.parse(serverNow);
  if (!isNaN(at) && !(room in st.offset)) st.offset[room] = now - at;
}

// This browser's clock less the node's, for a room: 0 until known.
export function clockOffset(st, room) {
  return st.offset[room] || 0;
}

// Where each entry of a room's schedule (as the operator API shows it, in
// time order) stands, as the page says it (http::admin::drop_view):
// 'applied', 'skipped' (with its error), 'next' (the pending entry the
// stats' `next_change_at` names) or 'pending'.
export function entryStates(schedule, nextChangeAt) {
  let named = false;
  return schedule.map(function (entry) {
    if (entry.applied_at) return 'applied';
    if (entry.error) return 'skipped';
    if (!named && entry.at === nextChangeAt) {
      named = true;
      return 'next';
    }
    return 'pending';
  });
}

// Whether an operator's pause holds the schedule: the room is paused and a
// pending entry fell due by `serverNow` (ms, on the node's clock).
export function scheduleHeld(paused, schedule, serverNow) {
  return paused === true && schedule.some(function (entry) {
    return !entry.applied_at && !entry.error && Date.parse(entry.at) <= serverNow;
  });
}
