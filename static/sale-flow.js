// Sale page flow: what each sale view from the server means for the page
// (seats taken from under the visitor, a hold that ran out or was confirmed
// elsewhere, a hold to resume after a reload) and the moves between phases:
// choosing, holding, confirmed, no sale, no pass.
import { setText, listing } from './lib-dom.js';
import { addTicket, describe, isSeatSale } from './sale-state.js';
import { setPhase, render, setMessage, showDefaultMessage } from './sale-view.js';

export const HOLD_RAN_OUT = 'Your hold ran out before you confirmed, so it went back on sale. You can choose again.';

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
        setMessage(app, (gone.length === 1 ? 'Seat ' + gone[0] + ' was' : 'Seats ' + listing(gone) + ' were') +
          ' just taken by someone else. Choose another.', 'warn');
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
      holdLost(app, HOLD_RAN_OUT);
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
    if (st.tickets.length) { setPhase(app, 'confirmed'); setMessage(app, 'Your purchase is confirmed.', 'ok'); }
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
  setMessage(app, 'There is no sale in this room at the moment. This page checks again every few seconds.', 'warn');
}

export function noPass(app, code) {
  app.countdown.stop();
  app.st.claim = null;
  setPhase(app, 'nopass');
  const why = code === 'pass_expired' ? 'Your pass has expired' : 'Your pass is missing or expired';
  setMessage(app, why + ': go back to the waiting room to get a new one.', 'error');
  if (app.el.back) app.el.back.hidden = false;
}

export function startHolding(app, c) {
  const el = app.el;
  app.st.claim = c;
  app.st.selected = [];
  setText(el.heldWhat, describe(c));
  setPhase(app, 'holding');
  app.countdown.start(c);
  setMessage(app, 'Held for you: confirm before the time runs out, or release it for someone else.', 'ok');
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
  setMessage(app, 'Released: it is back on sale for everyone. You can choose again.', 'info');
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
  setMessage(app, 'Your purchase is confirmed. Ticket #' + c.sequence + ' is yours.', 'ok');
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
