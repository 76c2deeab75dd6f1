// Sale page model: the one state object the sale modules pass around (as
// `app.st`), and what follows from it: how much is left, what is already
// the visitor's, how many more they may pick. Nothing here touches the DOM
// or says anything in words (sale-view.js does).
import { isCount } from './lib-dom.js';

export function createState() {
  return {
    phase: 'loading',   // loading | choosing | holding | confirmed | nosale | nopass
    sale: null,         // the last sale view
    claim: null,        // the held claim in the hold panel
    tickets: [],        // confirmed claims, in order of sequence
    dropped: {},        // claim ids released or expired here: never resumed
    selected: [],       // seat ids, in the order they were picked
    busy: false,        // a hold, confirm or release is on its way
    epoch: 0,           // bumped around every change; older refreshes are dropped
    pendingKey: null,   // Idempotency-Key of a hold whose answer never came
    pendingFor: '',     // ...and what it asked for
    // A message that says what just happened stays until the visitor acts;
    // otherwise the message is the phase's hint and follows the figures.
    noticeShown: false,
    // The hold's countdown (sale-countdown.js).
    countdown: {
      deadline: 0,          // the hold's end, on this browser's clock
      warnedMinute: false,  // the one-minute warning was given
      expiryChecked: false  // the server was asked once the time was up
    },
    // The refresh loop (sale-refresh.js).
    refresh: {
      running: false,       // a sale view is on its way
      failures: 0,          // in a row, for the backoff
      offlineShown: false   // the "cannot reach" message is up
    }
  };
}

// --- claims -----------------------------------------------------------------
export function units(c) {
  if (isCount(c.quantity) && c.quantity > 0) return c.quantity;
  return Array.isArray(c.seats) ? c.seats.length : 0;
}

export function addTicket(st, c) {
  if (!c || typeof c.claim_id !== 'string') return;
  for (let i = 0; i < st.tickets.length; i++) {
    if (st.tickets[i].claim_id === c.claim_id) { st.tickets[i] = c; return; }
  }
  st.tickets.push(c);
  st.tickets.sort((a, b) => (a.sequence || 0) - (b.sequence || 0));
}

// The claims in the last view that are the visitor's.
function mine(st) {
  return st.sale && Array.isArray(st.sale.mine) ? st.sale.mine : [];
}

// --- the sale -----------------------------------------------------------------
export function isSeatSale(st) {
  return !!st.sale && st.sale.kind === 'seats';
}

export function limit(st) {
  return st.sale && isCount(st.sale.per_user_limit) ? st.sale.per_user_limit : 1;
}

// Units held or bought by the visitor, counting what this page knows of
// that the last view did not list yet.
export function mineHeldUnits(st) {
  let n = 0;
  const listed = mine(st);
  for (const c of listed) {
    if (!c) continue;
    if (c.state === 'confirmed' || (c.state === 'held' && !st.dropped[c.claim_id])) n += units(c);
  }
  const isListed = (claimId) => listed.some((c) => c && c.claim_id === claimId);
  if (st.claim && !isListed(st.claim.claim_id)) n += units(st.claim);
  st.tickets.forEach((t) => { if (!isListed(t.claim_id)) n += units(t); });
  return n;
}

// How many more the visitor may pick.
export function canPick(st) {
  return Math.max(0, limit(st) - mineHeldUnits(st));
}

export function stockLeft(st) {
  if (!st.sale) return 0;
  if (isCount(st.sale.stock_left)) return st.sale.stock_left;
  let n = 0;
  const seats = st.sale.seats || {};
  for (const k in seats) if (seats[k] === 'free') n++;
  return n;
}

// Seat id -> 'held' or 'sold' for the visitor's own seats.
export function mySeats(st) {
  const out = {};
  const note = (c, how) => {
    if (!c || !Array.isArray(c.seats)) return;
    c.seats.forEach((s) => { out[s] = how; });
  };
  mine(st).forEach((c) => {
    if (!c) return;
    if (c.state === 'confirmed') note(c, 'sold');
    else if (c.state === 'held' && !st.dropped[c.claim_id]) note(c, 'held');
  });
  if (st.claim) note(st.claim, 'held');
  st.tickets.forEach((t) => note(t, 'sold'));
  return out;
}
