// Sale page view: the phase on <body>, the heading, the message line, the
// stock line, the Hold button, the busy state and the ticket card. Draws
// from `app.st`; the seat map and the quantity picker draw themselves
// (`app.seats`, `app.quantity`) when render() asks them to.
import { setText, show, isCount, plural, longDuration } from './lib-dom.js';
import { isSeatSale, stockLeft, canPick, limit, describe } from './sale-state.js';

export function setPhase(app, next) {
  app.st.phase = next;
  document.body.setAttribute('data-phase', next);
  render(app);
}

// --- messages -------------------------------------------------------------------
// A message about what just happened: it stays until the visitor acts.
export function setMessage(app, text, state) {
  app.st.noticeShown = true;
  const node = app.el.message;
  if (!node) return;
  node.setAttribute('data-state', state || 'info');
  setText(node, text);
}

// The phase's hint, as [text, state], or null when it has none.
function defaultMessage(st) {
  if (st.phase !== 'choosing') return null;
  const left = stockLeft(st);
  const may = canPick(st);
  if (left === 0) return ['Sold out: everything is held or sold. Held items come back if they are not bought in time, so keep this page open.', 'warn'];
  if (may === 0) return ['You have reached the limit of ' + limit(st) + ' per person.', 'warn'];
  if (isSeatSale(st)) {
    const more = Math.min(may, left) - st.selected.length;
    if (st.selected.length && more > 0) return ['Press Hold to keep your choice, or pick up to ' + more + ' more.', 'info'];
    if (st.selected.length) return ['Press Hold to keep your choice.', 'info'];
    return ['Pick up to ' + plural(Math.min(may, left), 'seat', 'seats') + ', then press Hold.', 'info'];
  }
  return ['Choose how many, then press Hold.', 'info'];
}

export function showDefaultMessage(app) {
  const m = defaultMessage(app.st);
  if (m) setMessage(app, m[0], m[1]);
  app.st.noticeShown = false;
}

// --- rendering ----------------------------------------------------------------
export function render(app) {
  const { st, el } = app;
  renderHeading(app);
  const phase = st.phase;
  show(el.choose, phase === 'choosing' && !!st.sale);
  show(el.holdPanel, phase === 'holding' && !!st.claim);
  show(el.ticket, st.tickets.length > 0 && (phase === 'confirmed' || phase === 'choosing' || phase === 'holding' || phase === 'nopass'));
  show(el.back, phase === 'nopass');
  if (st.sale) {
    show(el.seatPicker, isSeatSale(st));
    show(el.stockPicker, !isSeatSale(st));
    renderStock(app);
    if (isSeatSale(st)) app.seats.render(); else app.quantity.render();
    renderHoldButton(app);
  }
  renderTickets(app);
  renderBusy(app);
}

function renderHeading(app) {
  const st = app.st;
  const phase = st.phase;
  let heading = {
    loading: "You're in",
    choosing: isSeatSale(st) ? 'Choose your seats' : 'How many would you like?',
    holding: 'Confirm your purchase',
    confirmed: "You've got it",
    nosale: 'No sale here right now',
    nopass: 'Your pass is missing or expired'
  }[phase];
  if (phase === 'choosing' && st.sale && stockLeft(st) === 0) heading = 'Sold out';
  else if (phase === 'choosing' && st.tickets.length) heading = isSeatSale(st) ? 'Choose more seats' : 'Get more';
  setText(app.el.heading, heading || '');
}

function renderStock(app) {
  const { st, el } = app;
  const left = stockLeft(st);
  setText(el.stockLeft, String(left));
  setText(el.stockLeftLabel, isSeatSale(st) ? (left === 1 ? 'seat left' : 'seats left') : 'left');
  el.stockLeft.setAttribute('data-empty', left === 0 ? 'true' : 'false');
  setText(el.chooseTitle, isSeatSale(st) ? 'Seats' : 'Quantity');
  setText(el.limitNote, ' · up to ' + limit(st) + ' per person');
}

// How many the Hold button would hold.
function toHold(app) {
  return isSeatSale(app.st) ? app.st.selected.length : (app.quantity.chosen() || 0);
}

function renderHoldButton(app) {
  const { st, el } = app;
  const n = toHold(app);
  let label = 'Hold';
  if (isSeatSale(st) && n > 0) label = 'Hold ' + plural(n, 'seat', 'seats');
  else if (!isSeatSale(st) && n > 0) label = 'Hold ' + n;
  setText(el.hold, label);
  const ttl = st.sale && isCount(st.sale.hold_ttl_s) ? st.sale.hold_ttl_s : 0;
  if (ttl) {
    setText(el.holdHint, 'We keep it for you for ' + longDuration(ttl) + ' while you confirm.');
  }
}

export function renderBusy(app) {
  const { st, el } = app;
  el.hold.disabled = st.busy || !st.sale || toHold(app) === 0;
  el.hold.setAttribute('aria-busy', st.busy && st.phase === 'choosing' ? 'true' : 'false');
  el.confirm.disabled = st.busy;
  el.release.disabled = st.busy;
  el.buyMore.disabled = st.busy;
}

function renderTickets(app) {
  const { st, el } = app;
  if (!st.tickets.length) return;
  const last = st.tickets[st.tickets.length - 1];
  setText(el.ticketSequence, String(last.sequence));
  setText(el.ticketWhat, describe(last));
  const when = last.confirmed_at ? new Date(last.confirmed_at) : null;
  setText(el.ticketWhen, when && isFinite(when.getTime())
    ? 'Confirmed at ' + when.toLocaleTimeString() + '. Show this number when asked.'
    : 'Show this number when asked.');
  const others = st.tickets.slice(0, -1);
  show(el.otherTickets, others.length > 0);
  const text = others.map((t) => 'Ticket #' + t.sequence + ' · ' + describe(t)).join('\n');
  if (el.otherTickets.getAttribute('data-text') !== text) {
    el.otherTickets.setAttribute('data-text', text);
    el.otherTickets.textContent = '';
    others.forEach((t) => {
      const li = document.createElement('li');
      li.textContent = 'Also yours: Ticket #' + t.sequence + ' · ' + describe(t);
      el.otherTickets.appendChild(li);
    });
  }
  show(el.buyMore, st.phase === 'confirmed' && st.sale && canPick(st) > 0 && stockLeft(st) > 0);
}
