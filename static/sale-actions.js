// Sale page actions: Hold, Confirm and Release. Each sends one call (a hold
// keeps its Idempotency-Key until it gets an answer), keeps the page busy
// meanwhile, and turns the answer or the error code into the next phase or
// a message.
import { newKey, errorCode, errorMessage } from './lib-api.js';
import { isSeatSale, limit } from './sale-state.js';
import { renderBusy, setMessage } from './sale-view.js';
import { HOLD_RAN_OUT, startHolding, holdLost, released, onConfirmed, noSale, noPass } from './sale-flow.js';

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

function unreachable(app, what) {
  setMessage(app, 'We could not reach the sale to ' + what + '. Check your connection and try again.', 'error');
}

export function hold(app) {
  const st = app.st;
  if (st.busy || !st.sale || st.phase !== 'choosing') return;
  let payload;
  let what;
  if (isSeatSale(st)) {
    if (!st.selected.length) { setMessage(app, 'Choose at least one seat first.', 'warn'); return; }
    payload = { seats: st.selected.slice() };
    what = 'seats:' + st.selected.slice().sort().join(',');
  } else {
    const q = app.quantity.chosen();
    if (!(q > 0)) { setMessage(app, 'Choose how many first.', 'warn'); return; }
    payload = { quantity: q };
    what = 'quantity:' + q;
  }
  // A new key for each new choice; the same one again if the last try for
  // this very choice got no answer (it may have gone through).
  if (!st.pendingKey || st.pendingFor !== what) { st.pendingKey = newKey(); st.pendingFor = what; }
  const key = st.pendingKey;
  const done = () => end(app);
  begin(app);
  setMessage(app, 'Holding…', 'working');
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
    unreachable(app, 'hold it');
  }).then(done, done);
}

function claimFailed(app, res) {
  const code = errorCode(res);
  if (res.status === 401) { noPass(app, code); return; }
  if (res.status === 404 && code !== 'room_not_found') { noSale(app); return; }
  if (code === 'sold_out') {
    setMessage(app, isSeatSale(app.st)
      ? 'Sold out: there are no seats left to hold. Holds that run out come back on sale, so keep this page open.'
      : 'Not enough left to hold that many. The count is up to date again: choose again, or keep this page open, as holds that run out come back on sale.', 'error');
  } else if (code === 'seat_taken') {
    setMessage(app, 'Someone else was quicker for one of those seats. The map is up to date again: choose again.', 'error');
  } else if (code === 'limit_reached') {
    setMessage(app, 'That would take you over the limit of ' + limit(app.st) + ' per person.', 'error');
  } else if (res.status === 429) {
    setMessage(app, 'Lots of people are trying right now. Wait a moment, then press Hold again.', 'warn');
  } else if (res.status === 400) {
    const why = errorMessage(res);
    setMessage(app, 'That choice was not accepted' + (why ? ': ' + why : '.'), 'error');
  } else {
    setMessage(app, 'Something went wrong (' + res.status + '). Please try again.', 'error');
  }
  app.refreshSoon(0);
}

export function confirmHold(app) {
  const c = app.st.claim;
  if (app.st.busy || !c) return;
  const done = () => end(app);
  begin(app);
  setMessage(app, 'Confirming…', 'working');
  app.api.confirm(c.claim_id).then((res) => {
    const code = errorCode(res);
    if (res.ok && res.body && typeof res.body.claim_id === 'string') { onConfirmed(app, res.body); return; }
    if (res.status === 401) { noPass(app, code); return; }
    if (res.status === 410 || code === 'hold_expired') { holdLost(app, HOLD_RAN_OUT); return; }
    if (code === 'claim_released') {
      holdLost(app, 'This hold was released, so it went back on sale. You can choose again.');
      return;
    }
    if (res.status === 404) {
      holdLost(app, 'This hold is no longer there. You can choose again.');
      return;
    }
    setMessage(app, 'Your purchase could not be confirmed (' + res.status + '). Please press Confirm again.', 'error');
  }, () => {
    unreachable(app, 'confirm');
  }).then(done, done);
}

export function releaseHold(app) {
  const c = app.st.claim;
  if (app.st.busy || !c) return;
  const done = () => end(app);
  begin(app);
  setMessage(app, 'Releasing…', 'working');
  app.api.release(c.claim_id).then((res) => {
    if (res.status === 401) { noPass(app, errorCode(res)); return; }
    if (res.ok || res.status === 404 || res.status === 410) { released(app, c); return; }
    if (errorCode(res) === 'claim_confirmed' || res.status === 409) {
      setMessage(app, 'This hold can no longer be released.', 'warn');
      return;
    }
    setMessage(app, 'It could not be released (' + res.status + '). Please try again.', 'error');
  }, () => {
    unreachable(app, 'release it');
  }).then(done, done);
}
