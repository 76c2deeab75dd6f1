// Sale page refresh loop: asks for the sale view every few seconds (less
// often in a background tab, backing off while the server is unreachable),
// drops answers overtaken by a hold, confirm or release, and hands the rest
// to sale-flow.js. Owns its timer; whether a refresh is on its way and how
// many failed are `app.st.refresh`.
import { errorCode, backoff } from './lib-api.js';
import { t } from './lib-i18n.js';
import { showDefaultMessage, setMessage } from './sale-view.js';
import { applySale, noSale, noPass } from './sale-flow.js';

const REFRESH_MS = 2000;
const HIDDEN_REFRESH_MS = 10000;
const RETRY = { base: REFRESH_MS, max: 15000, cap: 4 };

// Returns {soon(ms), now()}: refresh in `ms` (replacing any refresh already
// planned) or right away.
export function createRefresher(app) {
  const st = app.st;
  const rf = st.refresh;
  let timer = null;

  function soon(ms) {
    if (timer) clearTimeout(timer);
    timer = setTimeout(refresh, ms);
  }

  function scheduleNext() {
    let ms = document.visibilityState === 'hidden' && st.phase !== 'holding' ? HIDDEN_REFRESH_MS : REFRESH_MS;
    if (rf.failures) ms = backoff(rf.failures, RETRY);
    soon(ms);
  }

  function refresh() {
    timer = null;
    if (rf.running) { scheduleNext(); return; }
    rf.running = true;
    const asked = st.epoch;
    app.api.view().then((res) => {
      rf.running = false;
      rf.failures = 0;
      if (rf.offlineShown) { rf.offlineShown = false; if (st.phase === 'choosing') showDefaultMessage(app); }
      if (asked !== st.epoch || st.busy) return; // something changed meanwhile: the next one tells
      if (res.status === 404) { noSale(app); return; }
      if (res.status === 401) { noPass(app, errorCode(res)); return; }
      if (!res.ok || !res.body || typeof res.body !== 'object') return;
      app.api.learnServerTime(res.body, res);
      applySale(app, res.body);
    }, () => {
      rf.running = false;
      rf.failures++;
      if (rf.failures >= 3 && !rf.offlineShown && (st.phase === 'choosing' || st.phase === 'loading')) {
        rf.offlineShown = true;
        setMessage(app, t('sale.msg_offline'), 'warn');
      }
    }).then(() => {
      if (st.phase !== 'nopass') scheduleNext();
    });
  }

  return { soon, now: refresh };
}
