// waitroom-client.js: one visitor's place in one room, for any page that
// shows its own waiting UI: the waiting page itself, or an app on another
// origin (React, a mobile web view) listed in the node's --cors-origins.
// It joins (solving the room's proof of work when asked), follows the
// place over the status WebSocket, reconnects with jittered backoff, polls
// `/status` while the socket is down, comes back at once after a node's
// restart (close 1012), and stops when the place ends (admitted, closed,
// expired, left). It draws nothing: what to show is the caller's.
//
//   import { joinRoom } from 'https://wait.example.com/static/waitroom-client.js';
//   const place = joinRoom({
//     base: 'https://wait.example.com', room: 'spring-sale',
//     ticket: localStorage.getItem('wr-ticket'),
//     onTicket: (t) => localStorage.setItem('wr-ticket', t),
//     onStatus: (s) => render(s),   // every Status (api.md), first the join's
//   });
//   // later: place.leave() gives the place up; place.close() just stops.
//
// An app whose own API sits behind the gate (`/api/gate`) hands the gate's
// 401 JSON answer to `joinFromGate(answer, options)`, which joins the room
// that answer names, on the waiting room it names.
//
// Across origins the browser may refuse the waiting room's cookies (third-
// party cookies), so the ticket is the caller's to keep (`onTicket`) and
// hand back (`ticket`); every call carries it as `Authorization: Bearer`,
// the socket as its subprotocol (`waitroom.ticket.<ticket>`, beside
// `waitroom`), never in a URL, which proxies write to their logs. Calls are
// made with `credentials: 'include'` all the same, so the cookies work where
// the browser allows them.
// docs/src/client.md is the reference.
import { request, backoff, errorCode, errorMessage, newKey } from './lib-api.js';
import { statusSocket, socketUrl } from './lib-socket.js';
import { FINAL_REFUSALS } from './refusals.js';

const DEFAULTS = {
  pingMs: 20000,                    // socket pings while quiet
  pollMs: 5000,                     // `/status` polls while the socket is down
  retry: { base: 1000, max: 30000 }, // join and reconnect backoff (jittered)
  powTries: 3                       // challenges solved before a join backs off
};


const TERMINAL = ['admitted', 'closed', 'expired', 'left'];

// The socket's subprotocol, and the prefix of the one that carries a ticket.
const SOCKET_PROTOCOL = 'waitroom';
const TICKET_PROTOCOL = 'waitroom.ticket.';

// Join refusals that retrying cannot change (the server's list): the caller
// is told (onRefused) and the client stops. A 404 without a code of ours
// (a proxy's) says the same: no such room here.
function isFinalRefusal(status, code) {
  return FINAL_REFUSALS.indexOf(code) >= 0 || (status === 404 && !code);
}

function noop() {}

// Seconds a 429 asks to wait (Retry-After), within reason.
function retryAfterMs(res) {
  const n = parseInt(res.retryAfter, 10);
  return (n > 0 ? Math.min(n, 600) : 30) * 1000;
}

// Solves an ALTCHA challenge on this thread (the default across origins,
// where a worker from the waiting room's origin may not be started):
// SHA-256 over the browser's crypto.subtle, whose every digest yields.
export async function solveChallengeHere(c) {
  const encoder = new TextEncoder();
  for (let n = 0; n <= c.maxnumber; n++) {
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(c.salt + n)));
    let hex = '';
    for (let i = 0; i < digest.length; i++) hex += (digest[i] < 16 ? '0' : '') + digest[i].toString(16);
    if (hex === c.challenge) return n;
  }
  return null;
}

// Starts following one place; see the header and docs/src/client.md.
//   base          the waiting room's URL ('' or absent: this page's origin)
//   room          the room's id (required)
//   ticket        a ticket kept from before, to take the same place back
//   user, code    a user token, a priority code, for the join
//   returnUrl     where the visitor came from (the join's `return`)
//   returning     the caller holds a ticket it cannot hand over (an HttpOnly
//                 cookie): ask where the place stands before joining
//   cookieSocket  open the socket with the room's cookie alone, never the
//                 ticket (a page on the waiting room's own origin)
//   onStatus(s)   every Status: the join's answer, each socket message, each poll
//   onTicket(t)   the ticket, whenever it is new: keep it to resume the place
//   onConnection(state)  connecting | live | reconnecting | polling | offline | done
//   onRefused({status, code, message})  the join was refused for good; stopped
//   onRetry({reason, inMs})  the join failed for now (reason: rate_limited or
//                 unreachable) and is tried again in inMs
//   onChallenge() the room asks for proof of work: it is being solved
//   solvePow(challenge)  → Promise of the number (default: solveChallengeHere)
//   pingMs, pollMs, retry ({base, max}), powTries
// Returns {ticket, status, leave(), close(), rejoin(), retryNow(fresh)}.
export function joinRoom(options) {
  const o = Object.assign({}, DEFAULTS, options);
  if (!o.room) throw new Error('joinRoom: room is required');
  const base = String(o.base || '').replace(/\/+$/, '');
  const api = base + '/api/rooms/' + encodeURIComponent(o.room);
  const on = {
    status: o.onStatus || noop,
    ticket: o.onTicket || noop,
    connection: o.onConnection || noop,
    refused: o.onRefused || noop,
    retry: o.onRetry || noop,
    challenge: o.onChallenge || noop
  };
  const solve = o.solvePow || solveChallengeHere;

  const st = {
    ticket: typeof o.ticket === 'string' && o.ticket ? o.ticket : null,
    status: null,
    joining: false,
    joinTimer: null,
    joinAttempt: 0,
    pow: null,
    powTries: 0,
    // Without a ticket, one key for every try of a join until one is
    // answered: a try whose answer was lost (a timeout, a 503 after the
    // store made the place) is found by the next, not made again.
    joinKey: null,
    done: false
  };

  function call(method, path, body) {
    const headers = st.ticket ? { 'Authorization': 'Bearer ' + st.ticket } : {};
    if (path === '/join' && !st.ticket) {
      if (!st.joinKey) st.joinKey = newKey();
      headers['Idempotency-Key'] = st.joinKey;
    }
    return request(method, api + path, { body, headers, credentials: 'include', cache: 'no-store' });
  }

  // Joined (a ticket held): the socket, with the ticket as its subprotocol
  // or, for `cookieSocket`, the cookie alone.
  const socket = statusSocket({
    url: () => (st.ticket ? socketUrl('/api/rooms/' + encodeURIComponent(o.room) + '/ws', base) : null),
    protocols: () => (st.ticket && !o.cookieSocket ? [SOCKET_PROTOCOL, TICKET_PROTOCOL + st.ticket] : undefined),
    active: () => !st.done,
    onStatus: deliver,
    onConnection: (state) => on.connection(state),
    poll,
    pingMs: o.pingMs,
    pollMs: o.pollMs,
    retry: o.retry
  });

  function finish() {
    st.done = true;
    clearTimeout(st.joinTimer); st.joinTimer = null;
    socket.stop();
    on.connection('done');
  }

  function deliver(s) {
    if (!s || typeof s !== 'object' || Array.isArray(s) || st.done) return;
    if (typeof s.ticket === 'string' && s.ticket && s.ticket !== st.ticket) {
      st.ticket = s.ticket;
      on.ticket(s.ticket);
    }
    st.status = s;
    const ends = TERMINAL.indexOf(s.state) >= 0;
    if (ends) finish();
    on.status(s);
  }

  function refuse(res) {
    st.joining = false;
    finish();
    on.refused({ status: res.status, code: errorCode(res), message: errorMessage(res) });
  }

  function retryJoin(reason, inMs) {
    st.joining = false;
    if (st.done) return;
    on.connection('offline');
    on.retry({ reason, inMs });
    st.joinTimer = setTimeout(join, inMs);
  }

  function joinBody() {
    const b = {};
    if (o.user) b.user = o.user;
    if (o.code) b.code = o.code;
    if (o.returnUrl) b['return'] = o.returnUrl;
    if (st.pow) b.pow = st.pow;
    return b;
  }

  function solvePow() {
    return request('GET', api + '/challenge', { credentials: 'include', cache: 'no-store' }).then((res) => {
      if (!res.ok || !res.parsed) throw new Error('challenge answered ' + res.status);
      const c = res.body;
      const started = Date.now();
      return Promise.resolve(solve(c)).then((number) => {
        if (number === null || number === undefined) throw new Error('no solution');
        return btoa(JSON.stringify({
          algorithm: c.algorithm, challenge: c.challenge, number,
          salt: c.salt, signature: c.signature, took: Date.now() - started
        }));
      });
    });
  }

  function join() {
    if (st.joining || st.done) return;
    st.joining = true;
    clearTimeout(st.joinTimer); st.joinTimer = null;
    call('POST', '/join', joinBody()).then((res) => {
      if (st.done) { st.joining = false; return; }
      const code = errorCode(res);
      if (res.status === 403 && (code === 'pow_required' || code === 'pow_invalid') && st.powTries < o.powTries) {
        st.powTries++;
        on.challenge();
        return solvePow().then((payload) => {
          st.pow = payload;
          st.joining = false;
          join();
        });
      }
      if (res.status === 401 && (code === 'invalid_ticket' || code === 'missing_ticket') && st.ticket) {
        // A ticket of another deployment or an old secret: a new place.
        st.ticket = null;
        st.joining = false;
        join();
        return;
      }
      if (isFinalRefusal(res.status, code)) { refuse(res); return; }
      if (res.status === 429) { retryJoin('rate_limited', retryAfterMs(res)); return; }
      if (!res.ok || !res.parsed) throw new Error('join answered ' + res.status);
      const s = res.body;
      if (!s || typeof s !== 'object' || typeof s.state !== 'string') throw new Error('bad join answer');
      st.joining = false;
      st.pow = null;
      st.powTries = 0;
      st.joinAttempt = 0;
      st.joinKey = null;
      deliver(s);
      // A socket still open belongs to the old ticket.
      if (!st.done) socket.restart();
    }).catch(() => {
      retryJoin('unreachable', backoff(st.joinAttempt++, { base: o.retry.base, max: o.retry.max, jitter: true }));
    });
  }

  // One `/status` poll, run by the socket every pollMs while it is down.
  function poll() {
    if (st.done || !st.ticket || st.joining) return;
    const asked = st.ticket;
    call('GET', '/status').then((res) => {
      if (st.done || st.ticket !== asked) return;
      if (res.status === 401) { join(); return; }
      if (res.status === 404) { refuse(res); return; }
      if (!res.ok || !res.parsed) throw new Error('status answered ' + res.status);
      if (!socket.isOpen()) on.connection('polling');
      deliver(res.body);
    }).catch(() => {
      if (!st.done && !socket.hasSocket()) on.connection('offline');
    });
  }

  function onOnline() {
    if (st.done) return;
    if (!st.ticket) { join(); return; }
    socket.retryNow(true);
  }
  function onVisible() {
    if (document.visibilityState === 'visible' && !st.done && st.ticket) socket.retryNow(false);
  }
  // Coming back online, or to the tab, is a reason to reconnect at once.
  function listen(yes) {
    const change = yes ? 'addEventListener' : 'removeEventListener';
    if (typeof window !== 'undefined') window[change]('online', onOnline);
    if (typeof document !== 'undefined') document[change]('visibilitychange', onVisible);
  }

  function stop() {
    if (!st.done) finish();
    listen(false);
  }

  // `lookFirst`: a visitor coming back (a reopened tab, a phone unlocked)
  // whose place lapsed while they were away is told so (`expired`,
  // `away_too_long`) rather than silently given a new place at the back;
  // anyone else joins (which returns a place still held).
  function start(lookFirst) {
    listen(true);
    on.connection('connecting');
    if (!lookFirst) { join(); return; }
    call('GET', '/status').then((res) => {
      const s = res.ok && res.parsed ? res.body : null;
      if (s && s.state === 'expired' && s.reason === 'away_too_long') deliver(s);
      else join();
    }, join);
  }

  // Only a visitor with a ticket can be coming back.
  start(st.ticket !== null || o.returning === true);

  return {
    // The current ticket (null until the join answered).
    get ticket() { return st.ticket; },
    // The last Status delivered, or null.
    get status() { return st.status; },
    // Gives the place up (or the admitted slot) and stops; resolves when
    // the server has answered (true: 204).
    leave() {
      const ticket = st.ticket;
      stop();
      if (!ticket) return Promise.resolve(false);
      return request('POST', api + '/leave', {
        headers: { 'Authorization': 'Bearer ' + ticket }, credentials: 'include'
      }).then((res) => res.status === 204, () => false);
    },
    // Stops following the place (no more calls); the place itself stays
    // until the server's grace period for absent visitors runs out.
    close: stop,
    // A new join and a new place (after `left` or `expired`, or a close).
    rejoin() {
      stop();
      st.done = false;
      st.ticket = null;
      st.status = null;
      st.joinAttempt = 0;
      start(false);
    },
    // Reconnect the socket now rather than at the next backoff step;
    // `fresh` also starts the backoff over.
    retryNow(fresh) { if (!st.done) socket.retryNow(fresh); }
  };
}

// The room and the waiting room's base a gate's refusal names: its
// `join_url` is `<base>/api/rooms/<room>/join` (absolute, http or https).
function gateRoom(body) {
  const room = body && typeof body.room === 'string' ? body.room : '';
  const tail = '/api/rooms/' + encodeURIComponent(room) + '/join';
  let url = null;
  try { url = new URL(body.join_url); } catch (e) { /* not a URL: refused below */ }
  if (!room || !url || (url.protocol !== 'https:' && url.protocol !== 'http:') || !url.pathname.endsWith(tail)) {
    throw new Error("joinFromGate: not the gate's answer (no room and join_url)");
  }
  return { room, base: url.origin + url.pathname.slice(0, -tail.length) };
}

// Joins from the gate's refusal: an app called its own API behind
// `/api/gate` asking for JSON, and got the 401 with `room`, `join_url` and
// `page_url` (docs/src/client.md). `answer` is that body, parsed, or the
// fetch Response itself, unread. `options` are joinRoom's, except that
// `base` and `room` are the answer's, so the app need know neither.
// Resolves to joinRoom's handle; rejects when the answer is not the gate's.
export async function joinFromGate(answer, options) {
  const body = answer && typeof answer.json === 'function' ? await answer.json() : answer;
  return joinRoom(Object.assign({}, options, gateRoom(body)));
}
