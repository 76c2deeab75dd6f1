// Sale page hold countdown: counts the held claim down on the server's clock
// (as estimated by sale-api.js), warns once with a minute left, and asks the
// server as soon as the time is up. Owns the timer; the deadline and what
// was said about it are `app.st.countdown`.
import { setText, isCount, clock } from './lib-dom.js';
import { t } from './lib-i18n.js';
import { setMessage } from './sale-view.js';

const URGENT_S = 30;
const TICK_MS = 250;

export function createCountdown(app) {
  const { st, el } = app;
  const cd = st.countdown;
  let timer = null;

  function tick() {
    const left = Math.max(0, cd.deadline - Date.now());
    const s = Math.ceil(left / 1000);
    setText(el.countdown, clock(s));
    el.countdown.setAttribute('data-urgent', s <= URGENT_S ? 'true' : 'false');
    if (s <= 60 && s > 50 && !cd.warnedMinute && !st.busy) {
      cd.warnedMinute = true;
      setMessage(app, t('sale.msg_last_minute'), 'warn');
    }
    if (left === 0 && !cd.expiryChecked) {
      // The server decides; ask it now rather than in two seconds.
      cd.expiryChecked = true;
      app.refreshSoon(0);
    }
  }

  function stop() {
    if (timer) { clearInterval(timer); timer = null; }
  }

  // Counts `claim` down from its hold_expires_at.
  function start(claim) {
    stop();
    cd.warnedMinute = false;
    cd.expiryChecked = false;
    const ends = Date.parse(claim.hold_expires_at || '');
    const ttl = st.sale && isCount(st.sale.hold_ttl_s) ? st.sale.hold_ttl_s * 1000 : 0;
    if (!isFinite(ends)) {
      cd.deadline = Date.now() + (ttl || 0);
    } else {
      cd.deadline = ends - app.api.clock.offsetMs;
      // A clock we could not place: never show more time than a hold lasts.
      if (ttl && cd.deadline - Date.now() > ttl + 2000) cd.deadline = Date.now() + ttl;
    }
    tick();
    timer = setInterval(tick, TICK_MS);
  }

  return { start, stop };
}
