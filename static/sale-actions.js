// Sale page actions: Hold, Confirm and Release. Each sends one call (a hold
// keeps its Idempotency-Key until it gets an answer), keeps the page busy
// meanwhile, and turns the answer or the error code into the next phase or
// a message.
import { newKey, errorCode, errorMessage } from './lib-api.js';
import { t } from './lib-i18n.js';
import { isSeatSale, limit } from './sale-state.js';
import { renderBusy, setMessage } from './sale-view.js';
import { startHolding, holdLost, released, onConfirmed, noSale, noPass } from './sale-flow.js';

// A call is on its way: refreshes started before it are dropped.
function begin(app) {
  app.st.busy = true;
  app.st.epoch++;
  renderBusy(app);
}

function end(app) {
  app.st.busy = false;
  app.st.epoch++;
  renderBusy(app);
  app.refreshSoon(300);
}

// `text`: what could not be done, in full.
function unreachable(app, text) {
  setMessage(app, text, 'error');
}

export function hold(app) {
  const st = app.st;
  if (st.busy || !st.sale || st.phase !== 'choosing') return;
  let payload;
  let what;
  if (isSeatSale(st)) {
    if (!st.selected.length) { setMessage(app, t('sale.msg_choose_seat_first'), 'warn'); return; }
    payload = { seats: st.selected.slice() };
    what = 'seats:' + st.selected.slice().sort().join(',');
  } else {
    const q = app.quantity.chosen();
    if (!(q > 0)) { setMessage(app, t('sale.msg_choose_quantity_first'), 'warn'); return; }
    payload = { quantity: q };
    what = 'quantity:' + q;
  }
  // A new key for each new choice; the same one again if the last try for
  // this very choice got no answer (it may have gone through).
  if (!st.pendingKey || st.pendingFor !== what) { st.pendingKey = newKey(); st.pendingFor = what; }
  const key = st.pendingKey;
  const done = () => end(app);
  begin(app);
  setMessage(app, t('sale.msg_holding'), 'working');
  app.api.hold(payload, key).then((res) => {
    st.pendingKey = null;
    if (res.ok && res.body && typeof res.body.claim_id === 'string') {
      app.api.learnServerTime(res.body, res);
      app.api.learnFromHold(res.body, res, st.sale ? st.sale.hold_ttl_s : undefined);
      if (res.body.state === 'confirmed') onConfirmed(app, res.body); else startHolding(app, res.body);
      return;
    }
    claimFailed(app, res);
  }, () => {
    unreachable(app, t('sale.unreachable_hold'));
  }).then(done, done);
}

function claimFailed(app, res) {
  const code = errorCode(res);
  if (res.status === 401) { noPass(app, code); return; }
  if (res.status === 404 && code !== 'room_not_found') { noSale(app); return; }
  if (code === 'sold_out') {
    setMessage(app, isSeatSale(app.st) ? t('sale.msg_sold_out_seats') : t('sale.msg_sold_out_stock'), 'error');
  } else if (code === 'seat_taken') {
    setMessage(app, t('sale.msg_seat_taken'), 'error');
  } else if (code === 'limit_reached') {
    setMessage(app, t('sale.msg_over_limit', { n: limit(app.st) }), 'error');
  } else if (res.status === 429) {
    setMessage(app, t('sale.msg_busy'), 'warn');
  } else if (res.status === 400) {
    const why = errorMessage(res);
    setMessage(app, why ? t('sale.msg_not_accepted_why', { why }) : t('sale.msg_not_accepted'), 'error');
  } else {
    setMessage(app, t('sale.msg_failed', { status: res.status }), 'error');
  }
  app.refreshSoon(0);
}

export function confirmHold(app) {
  const c = app.st.claim;
  if (app.st.busy || !c) return;
  const done = () => end(app);
  begin(app);
  setMessage(app, t('sale.msg_confirming'), 'working');
  app.api.confirm(c.claim_id).then((res) => {
    const code = errorCode(res);
    if (res.ok && res.body && typeof res.body.claim_id === 'string') { onConfirmed(app, res.body); return; }
    if (res.status === 401) { noPass(app, code); return; }
    if (res.status === 410 || code === 'hold_expired') { holdLost(app, t('sale.msg_hold_ran_out')); return; }
    if (code === 'claim_released') {
      holdLost(app, t('sale.msg_hold_released'));
      return;
    }
    if (res.status === 404) {
      holdLost(app, t('sale.msg_hold_gone'));
      return;
    }
    setMessage(app, t('sale.msg_confirm_failed', { status: res.status }), 'error');
  }, () => {
    unreachable(app, t('sale.unreachable_confirm'));
  }).then(done, done);
}

export function releaseHold(app) {
  const c = app.st.claim;
  if (app.st.busy || !c) return;
  const done = () => end(app);
  begin(app);
  setMessage(app, t('sale.msg_releasing'), 'working');
  app.api.release(c.claim_id).then((res) => {
    if (res.status === 401) { noPass(app, errorCode(res)); return; }
    if (res.ok || res.status === 404 || res.status === 410) { released(app, c); return; }
    if (errorCode(res) === 'claim_confirmed' || res.status === 409) {
      setMessage(app, t('sale.msg_cannot_release'), 'warn');
      return;
    }
    setMessage(app, t('sale.msg_release_failed', { status: res.status }), 'error');
  }, () => {
    unreachable(app, t('sale.unreachable_release'));
  }).then(done, done);
}
