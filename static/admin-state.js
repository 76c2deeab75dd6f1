// Operator page model: the one state object admin.js keeps (its two refresh
// loops' failures and stops, the rooms that have no sale for now, each
// room's chart history) and the changes to it. Nothing here touches the DOM.

// A chart shows this much history.
export const CHART_SPAN_MS = 30 * 60 * 1000;

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

// Records one sample of a room's stats; returns the room's samples over
// the chart's span. The history lives in this page only: a chart starts
// when the page opens, and watching costs the store nothing more.
export function recordSample(st, room, stats, now) {
  const samples = st.history[room] || (st.history[room] = []);
  samples.push({ at: now, waiting: stats.waiting, active: stats.active, admitted_last_minute: stats.admitted_last_minute });
  while (samples.length && samples[0].at < now - CHART_SPAN_MS) samples.shift();
  return samples;
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
