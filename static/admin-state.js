// Operator page model: the one state object admin.js keeps (its two refresh
// loops' failures and stops, the rooms that have no sale for now, each
// room's chart samples: the node's hour of history, then the page's own)
// and the changes to it. Nothing here touches the DOM.

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
    history: {}         // room id -> chart samples, oldest first
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
