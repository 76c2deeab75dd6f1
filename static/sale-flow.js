// Sale page flow: what each sale view from the server means for the page
// (seats taken from under the visitor, a hold that ran out or was confirmed
// elsewhere, a hold to resume after a reload) and the moves between phases:
// choosing, holding, confirmed, no sale, no pass.
import { setText } from './lib-dom.js';
import { t } from './lib-i18n.js';
import { addTicket, isSeatSale } from './sale-state.js';
import { setPhase, render, setMessage, showDefaultMessage, listing, describe } from './sale-view.js';

export function applySale(app, view) {
  const st = app.st;
  st.sale = view;
  const mine = Array.isArray(view.mine) ? view.mine : [];
  mine.forEach((c) => { if (c && c.state === 'confirmed') addTicket(st, c); });
  const held = mine.filter((c) =>
    c && c.state === 'held' && typeof c.claim_id === 'string' && !st.dropped[c.claim_id]);

  // Chosen seats someone else just took.
  if (isSeatSale(st) && st.selected.length) {
    const seats = view.seats || {};
    const gone = st.selected.filter((s) => seats[s] !== 'free');
    if (gone.length) {
      st.selected = st.selected.filter((s) => seats[s] === 'free');
      if (st.phase === 'choosing') {
        setMessage(app, gone.length === 1
          ? t('sale.msg_seat_taken_one', { seats: gone[0] })
          : t('sale.msg_seats_taken_many', { seats: listing(gone) }), 'warn');
      }
    }
  }

  if (st.phase === 'holding' && st.claim) {
    const claim = st.claim;
    let still = null;
    for (const c of mine) if (c && c.claim_id === claim.claim_id) still = c;
    if (still && still.state === 'confirmed') { onConfirmed(app, still); return; }
    if (!still) {
      if (st.tickets.some((t) => t.claim_id === claim.claim_id)) { onConfirmed(app, claim); return; }
      holdLost(app, t('sale.msg_hold_ran_out'));
      return;
    }
    render(app);
    return;
  }
  if ((st.phase === 'loading' || st.phase === 'choosing' || st.phase === 'confirmed') && held.length && !st.busy) {
    // A hold from before a reload (or another tab): carry on with it.
    held.sort((a, b) => (b.sequence || 0) - (a.sequence || 0));
    startHolding(app, held[0]);
    return;
  }
  if (st.phase === 'loading' || st.phase === 'nosale') {
    if (st.tickets.length) { setPhase(app, 'confirmed'); setMessage(app, t('sale.msg_confirmed'), 'ok'); }
    else { setPhase(app, 'choosing'); showDefaultMessage(app); }
    return;
  }
  render(app);
  if (st.phase === 'choosing' && !st.noticeShown) showDefaultMessage(app);
}

export function noSale(app) {
  app.st.sale = null;
  app.st.claim = null;
  app.countdown.stop();
  setPhase(app, 'nosale');
  setMessage(app, t('sale.msg_no_sale'), 'warn');
}

export function noPass(app, code) {
  app.countdown.stop();
  app.st.claim = null;
  setPhase(app, 'nopass');
  setMessage(app, code === 'pass_expired' ? t('sale.msg_pass_expired') : t('sale.msg_no_pass'), 'error');
  if (app.el.back) app.el.back.hidden = false;
}

export function startHolding(app, c) {
  const el = app.el;
  app.st.claim = c;
  app.st.selected = [];
  setText(el.heldWhat, describe(c));
  setPhase(app, 'holding');
  app.countdown.start(c);
  setMessage(app, t('sale.msg_held'), 'ok');
  if (el.confirm && document.activeElement === el.hold) el.confirm.focus();
}

// Back to choosing after the hold went away; `text` says why.
export function holdLost(app, text) {
  const st = app.st;
  if (st.claim) st.dropped[st.claim.claim_id] = true;
  st.claim = null;
  app.countdown.stop();
  setPhase(app, 'choosing');
  setMessage(app, text, 'error');
  app.refreshSoon(0);
}

// Back to choosing after the visitor released the hold.
export function released(app, c) {
  app.st.dropped[c.claim_id] = true;
  app.st.claim = null;
  app.countdown.stop();
  setPhase(app, 'choosing');
  setMessage(app, t('sale.msg_released'), 'info');
  if (app.el.hold) app.el.hold.focus();
}

export function onConfirmed(app, c) {
  const st = app.st;
  const ticket = app.el.ticket;
  addTicket(st, c);
  st.dropped[c.claim_id] = true; // no longer a hold to resume
  st.claim = null;
  app.countdown.stop();
  setPhase(app, 'confirmed');
  setMessage(app, t('sale.msg_confirmed_ticket', { n: c.sequence }), 'ok');
  if (ticket) {
    ticket.setAttribute('tabindex', '-1');
    try { ticket.focus({ preventScroll: false }); } catch (e) { ticket.focus(); }
  }
}

// "Choose more" after a purchase.
export function chooseMore(app) {
  setPhase(app, 'choosing');
  showDefaultMessage(app);
  app.refreshSoon(0);
}
