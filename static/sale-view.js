// Sale page view: the phase on <body>, the heading, the message line, the
// stock line, the Hold button, the busy state and the ticket card. Draws
// from `app.st`; the seat map and the quantity picker draw themselves
// (`app.seats`, `app.quantity`) when render() asks them to. Also the
// wording the sale modules share: lists, durations, what a claim is.
import { setText, show, isCount } from './lib-dom.js';
import { t } from './lib-i18n.js';
import { isSeatSale, stockLeft, canPick, limit, units } from './sale-state.js';

// --- wording ---------------------------------------------------------------------
// "A", "A and B", "A, B and C" (in the page's language).
export function listing(items) {
  if (items.length <= 1) return items.join('');
  return t('sale.list_last', {
    rest: items.slice(0, -1).join(t('sale.list_separator')),
    last: items[items.length - 1]
  });
}

// A span in whole seconds, spelled out: "1 minute 30 seconds".
function longDuration(s) {
  const seconds = (n) => (n === 1 ? t('sale.duration_seconds_one', { n }) : t('sale.duration_seconds_many', { n }));
  if (s < 60) return seconds(s);
  const m = Math.floor(s / 60);
  const rest = s % 60;
  const minutes = m === 1 ? t('sale.duration_minutes_one', { n: m }) : t('sale.duration_minutes_many', { n: m });
  return rest ? t('sale.duration_joined', { minutes, seconds: seconds(rest) }) : minutes;
}

// What a claim is: "Seats A1 and A2", "3 items".
export function describe(c) {
  const seats = Array.isArray(c.seats) ? c.seats.filter((s) => typeof s === 'string') : [];
  if (seats.length) {
    return seats.length === 1
      ? t('sale.describe_seat_one', { seats: listing(seats) })
      : t('sale.describe_seats_many', { seats: listing(seats) });
  }
  const n = units(c);
  return n === 1 ? t('sale.describe_items_one', { n }) : t('sale.describe_items_many', { n });
}

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
  if (left === 0) return [t('sale.msg_sold_out_choosing'), 'warn'];
  if (may === 0) return [t('sale.msg_limit_reached', { n: limit(st) }), 'warn'];
  if (isSeatSale(st)) {
    const more = Math.min(may, left) - st.selected.length;
    if (st.selected.length && more > 0) return [t('sale.msg_hold_or_pick_more', { n: more }), 'info'];
    if (st.selected.length) return [t('sale.msg_hold_choice'), 'info'];
    const n = Math.min(may, left);
    return [n === 1 ? t('sale.msg_pick_seats_one', { n }) : t('sale.msg_pick_seats_many', { n }), 'info'];
  }
  return [t('sale.msg_choose_quantity'), 'info'];
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
    loading: t('sale.heading_loading'),
    choosing: isSeatSale(st) ? t('sale.heading_choose_seats') : t('sale.heading_choose_quantity'),
    holding: t('sale.heading_holding'),
    confirmed: t('sale.heading_confirmed'),
    nosale: t('sale.heading_nosale'),
    nopass: t('sale.heading_nopass')
  }[phase];
  if (phase === 'choosing' && st.sale && stockLeft(st) === 0) heading = t('sale.heading_sold_out');
  else if (phase === 'choosing' && st.tickets.length) heading = isSeatSale(st) ? t('sale.heading_more_seats') : t('sale.heading_more');
  setText(app.el.heading, heading || '');
}

function renderStock(app) {
  const { st, el } = app;
  const left = stockLeft(st);
  setText(el.stockLeft, String(left));
  setText(el.stockLeftLabel, isSeatSale(st) ? (left === 1 ? t('sale.seat_left') : t('sale.seats_left')) : t('sale.left'));
  el.stockLeft.setAttribute('data-empty', left === 0 ? 'true' : 'false');
  setText(el.chooseTitle, isSeatSale(st) ? t('sale.choose_seats_title') : t('sale.choose_quantity_title'));
  setText(el.limitNote, t('sale.limit_note', { n: limit(st) }));
}

// How many the Hold button would hold.
function toHold(app) {
  return isSeatSale(app.st) ? app.st.selected.length : (app.quantity.chosen() || 0);
}

function renderHoldButton(app) {
  const { st, el } = app;
  const n = toHold(app);
  let label = t('sale.hold');
  if (isSeatSale(st) && n > 0) label = n === 1 ? t('sale.hold_seats_one', { n }) : t('sale.hold_seats_many', { n });
  else if (!isSeatSale(st) && n > 0) label = t('sale.hold_quantity', { n });
  setText(el.hold, label);
  const ttl = st.sale && isCount(st.sale.hold_ttl_s) ? st.sale.hold_ttl_s : 0;
  if (ttl) {
    setText(el.holdHint, t('sale.hold_hint_ttl', { duration: longDuration(ttl) }));
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
    ? t('sale.ticket_when', { time: when.toLocaleTimeString() })
    : t('sale.ticket_show'));
  const others = st.tickets.slice(0, -1);
  show(el.otherTickets, others.length > 0);
  const lines = others.map((c) => t('sale.ticket_also', { n: c.sequence, what: describe(c) }));
  const text = lines.join('\n');
  if (el.otherTickets.getAttribute('data-text') !== text) {
    el.otherTickets.setAttribute('data-text', text);
    el.otherTickets.textContent = '';
    lines.forEach((line) => {
      const li = document.createElement('li');
      li.textContent = line;
      el.otherTickets.appendChild(li);
    });
  }
  show(el.buyMore, st.phase === 'confirmed' && st.sale && canPick(st) > 0 && stockLeft(st) > 0);
}
