// Sale page API calls: the sale view, hold, confirm and release, all
// same-origin (the pass travels in the HttpOnly `wr_pass` cookie) and never
// cached. Also owns the estimate of the server's clock that the hold
// countdown runs on, learnt from these answers.
import { request } from './lib-api.js';
import { isCount } from './lib-dom.js';

export function createSaleApi(room) {
  const base = '/api/rooms/' + encodeURIComponent(room) + '/sale';
  // Server clock minus this browser's clock. Holds end on the server's
  // clock, so the countdown is shifted by this much.
  const clock = {
    offsetMs: 0,
    source: 'none' // none (each Date header updates it) | claim | server
  };

  // Resolves to lib-api's answer for any HTTP answer; rejects only when the
  // server could not be reached.
  function call(method, url, payload, headers) {
    return request(method, url, { body: payload, headers, cache: 'no-store' }).then((res) => {
      if (clock.source === 'none') {
        const date = Date.parse(res.date);
        if (isFinite(date)) clock.offsetMs = date - (res.sent + res.got) / 2;
      }
      return res;
    });
  }

  function claimUrl(claimId) {
    return base + '/claims/' + encodeURIComponent(claimId);
  }

  return {
    clock,
    view: () => call('GET', base),
    hold: (payload, key) => call('POST', base + '/claims', payload, { 'Idempotency-Key': key }),
    confirm: (claimId) => call('POST', claimUrl(claimId) + '/confirm'),
    release: (claimId) => call('DELETE', claimUrl(claimId)),

    // An answer that carries `server_time` places the clock best.
    learnServerTime(data, res) {
      const t = data && typeof data.server_time === 'string' ? Date.parse(data.server_time) : NaN;
      if (isFinite(t)) {
        clock.offsetMs = t - (res.sent + res.got) / 2;
        clock.source = 'server';
      }
    },

    // Without it, a fresh hold started about now on the server's clock.
    learnFromHold(claim, res, holdTtlS) {
      if (clock.source === 'server' || !isCount(holdTtlS)) return;
      const ends = Date.parse(claim.hold_expires_at || '');
      if (isFinite(ends)) {
        clock.offsetMs = ends - holdTtlS * 1000 - (res.sent + res.got) / 2;
        clock.source = 'claim';
      }
    }
  };
}
