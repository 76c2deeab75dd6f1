// Waiting-room page: shows the visitor's place as waitroom-client.js
// follows it (the join, the status socket, polling while it is down), and
// sends the visitor on when admitted. Owns the drawing of the page's
// figures and messages; its state and the decisions on it live in
// room-state.js, its texts come from lib-i18n.js.
import { $, setText, isCount, formatCount } from './lib-dom.js';
import { t, lang } from './lib-i18n.js';
import { joinRoom } from './waitroom-client.js';
import {
  createRoomState, startOver, inPreQueue, enterPreQueue, leavePreQueue,
  notePosition, paceAnnouncement, keptAwayNote
} from './room-state.js';
import { setUpNotify } from './room-notify.js';

const REDIRECT_DELAY_MS = 1500;
const ANNOUNCE_MIN_GAP_MS = 10000;

const body = document.body;
// The page's live parts are shown only once this script runs (style.css).
body.classList.remove('no-js');
const room = body.getAttribute('data-room') || '';

const el = {
  heading: $('heading'),
  position: $('position'),
  waiting: $('waiting'),
  eta: $('eta'),
  progress: $('progress'),
  fill: $('progress-fill'),
  connection: $('connection'),
  message: $('message'),
  announce: $('announce'),
  joinAgain: $('join-again'),
  cont: $('continue'),
  signIn: $('sign-in'),
  notice: $('notice'),
  stock: $('stock'),
  opening: $('opening'),
  countdown: $('countdown'),
  entryLine: $('entry-line'),
  entry: $('entry'),
  keepOpen: $('keep-open')
};

// A user token from the site that sends its signed-in customers here
// (`?user=…`), or a priority code (`?code=…`): read once, then taken out
// of the address bar so it is not bookmarked or shared (a code shared is a
// code spent); the ticket cookie keeps the place after that.
function takeFromAddress(name) {
  const params = new URLSearchParams(location.search);
  const value = params.get(name);
  if (value === null) return null;
  params.delete(name);
  const query = params.toString();
  history.replaceState(null, '', location.pathname + (query ? '?' + query : '') + location.hash);
  return value;
}

const userToken = takeFromAddress('user');
const priorityCode = takeFromAddress('code');
// Where a forward-auth gate sent the visitor from (`?return=`), for the
// join; kept in the address bar (a reload joins with it again).
const returnTo = new URLSearchParams(location.search).get('return');
const st = createRoomState();
// Until a status says otherwise, what the page was rendered with.
st.keptAwaySeconds = Number(body.getAttribute('data-kept-away-seconds')) || 0;
// How long a visitor who asked to be notified has to come back once called.
st.notifyReturnSeconds = Number(body.getAttribute('data-notify-return-seconds')) || 0;
st.notify = false;

// Proof of work, when the room asks for it: solved in a worker so the
// page stays responsive (the page and the worker share an origin; an app
// elsewhere solves on its own thread, waitroom-client.js's default).
function solveInWorker(c) {
  return new Promise(function (resolve, reject) {
    const worker = new Worker('/static/pow-worker.js');
    worker.onmessage = function (e) { worker.terminate(); resolve(e.data.number); };
    worker.onerror = function () { worker.terminate(); reject(new Error('worker failed')); };
    worker.postMessage({ challenge: c.challenge, salt: c.salt, maxnumber: c.maxnumber });
  });
}

// --- view -------------------------------------------------------------------
function setConnection(state) {
  if (!el.connection) return;
  const text = {
    connecting: t('room.conn_connecting'), live: t('room.conn_live'),
    reconnecting: t('room.conn_reconnecting'), polling: t('room.conn_polling'),
    offline: t('room.conn_offline'), done: null
  }[state];
  el.connection.setAttribute('data-state', state);
  if (text) setText(el.connection, text);
  el.connection.hidden = state === 'done';
}

// The page's overall state, for the stylesheet (it hides the line's
// figures once they no longer mean anything) and the heading.
function setPageState(state) {
  body.setAttribute('data-state', state);
  const heading = {
    admitted: t('room.heading_admitted'), closed: t('room.heading_closed'), lost: t('room.heading_lost')
  }[state] || t('room.heading');
  setText(el.heading, heading);
}

function setMessage(text, state) {
  if (!el.message) return;
  el.message.setAttribute('data-state', state);
  setText(el.message, text);
}

function setProgress(pct) {
  pct = Math.max(0, Math.min(100, Math.round(pct)));
  if (el.progress) {
    el.progress.setAttribute('aria-valuenow', String(pct));
    el.progress.setAttribute('aria-valuetext', pct + '%');
  }
  if (el.fill) el.fill.style.width = pct + '%';
}

function say(text, urgent) {
  if (!el.announce || !text) return;
  if (st.announceTimer) { clearTimeout(st.announceTimer); st.announceTimer = null; }
  const pace = paceAnnouncement(st, text, urgent, Date.now(), ANNOUNCE_MIN_GAP_MS);
  if (pace.say) el.announce.textContent = text;
  if (pace.retryInMs === undefined) return;
  // Too soon after the last one: say the latest text once the gap is over.
  st.announceTimer = setTimeout(function () {
    st.announceTimer = null;
    if (st.pendingAnnounce) say(st.pendingAnnounce, true);
  }, pace.retryInMs);
}

function formatEta(seconds, paused) {
  if (!isCount(seconds)) return paused ? t('room.eta_paused') : t('room.eta_calculating');
  if (seconds < 60) return t('room.eta_under_minute');
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 60) return t('room.eta_minutes', { n: minutes });
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  return t('room.eta_hours', { h, m });
}

function showJoinAgain(visible) {
  if (el.joinAgain) el.joinAgain.hidden = !visible;
}

function safeRedirect(url) {
  if (typeof url !== 'string' || !url) return null;
  try {
    const u = new URL(url, location.href);
    return (u.protocol === 'http:' || u.protocol === 'https:') ? u.href : null;
  } catch (e) { return null; }
}

// --- status handling ------------------------------------------------------
// The operator's notice: shown as text (never as markup), hidden when none.
function showNotice(notice) {
  if (!el.notice) return;
  const text = typeof notice === 'string' ? notice : '';
  if (el.notice.textContent !== text) el.notice.textContent = text;
  el.notice.hidden = text === '';
}

// What the sale behind the line has left, when there is one.
function showStock(left) {
  if (!el.stock) return;
  const known = isCount(left);
  if (known) setText(el.stock, t('room.stock_left', { n: formatCount(left, lang) }));
  el.stock.hidden = !known;
}

// How long a place is kept while its visitor is away, said as the server
// says it (pages::kept_away): whole minutes, or seconds under a minute.
function keptAway(seconds) {
  return seconds >= 60 ? t('room.kept_minutes', { n: Math.floor(seconds / 60) })
    : t('room.kept_seconds', { n: seconds });
}

// The note under the line tells how long the place is kept while away,
// kept true when the operator changes it; once the visitor asked to be
// notified, that it is kept until they are called, and for how long after.
function showKeptAway(seconds) {
  if (isCount(seconds)) st.keptAwaySeconds = seconds;
  if (!el.keepOpen) return;
  const note = keptAwayNote(st.notify, st.keptAwaySeconds, st.notifyReturnSeconds);
  const time = keptAway(note.seconds);
  setText(el.keepOpen, note.key === 'room.keep_open_notify'
    ? t('room.keep_open_notify', { time }) : t('room.keep_open', { time }));
}

function handleStatus(s) {
  if (!s || typeof s !== 'object' || Array.isArray(s)) return;
  if (notify) notify.update(s);
  showKeptAway(s.kept_away_seconds);
  showNotice(s.notice);
  showStock(s.stock_left);
  switch (s.state) {
    case 'waiting': onWaiting(s); break;
    case 'admitted': onAdmitted(s); break;
    case 'closed':
      if (s.reason === 'sold_out') onFinished(t('room.msg_sold_out'), 'closed', false);
      else onFinished(t('room.msg_closed'), 'closed', false);
      break;
    case 'expired':
      if (s.reason === 'away_too_long') onFinished(t('room.msg_away_too_long', { time: keptAway(st.keptAwaySeconds) }), 'expired', true);
      else onFinished(t('room.msg_expired'), 'expired', true);
      break;
    case 'left': onFinished(t('room.msg_left'), 'left', true); break;
    default: break; // unknown state: ignore
  }
}

// --- the scheduled opening ------------------------------------------------------
// Before the opening the visitor is in the pre-queue: no position exists,
// so the page counts down to the opening instead, and says why arriving
// early does not matter.
function two(n) { return (n < 10 ? '0' : '') + n; }

function countdownText(ms) {
  let left = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(left / 86400); left -= d * 86400;
  const h = Math.floor(left / 3600); left -= h * 3600;
  const m = Math.floor(left / 60);
  const sec = left - m * 60;
  const parts = { d: d, h: two(h), m: two(m), s: two(sec) };
  return d > 0 ? t('room.countdown_days', parts) : t('room.countdown_clock', parts);
}

function tickCountdown() {
  if (st.opensAt === null) return;
  const left = st.opensAt - Date.now();
  setText(el.countdown, left > 0 ? countdownText(left) : t('room.opening_drawing'));
}

// The big number: a count, or a short phrase ("Drawn at the opening"),
// which is set smaller so that it wraps between words, not inside them.
function setPosition(text, phrase) {
  if (!el.position) return;
  el.position.classList.toggle('phrase', phrase);
  setText(el.position, text);
}

function showPreQueue(s) {
  const needsTimer = enterPreQueue(st, s);
  if (el.opening) el.opening.hidden = false;
  if (typeof s.entry === 'string' && el.entry && el.entryLine) {
    setText(el.entry, s.entry);
    el.entryLine.hidden = false;
  }
  setPosition(t('room.position_at_opening'), true);
  tickCountdown();
  if (needsTimer) st.countdownTimer = setInterval(tickCountdown, 1000);
}

function hidePreQueue() {
  leavePreQueue(st);
  if (el.opening) el.opening.hidden = true;
}

function onWaiting(s) {
  if (st.done) return;
  showJoinAgain(false);
  setPageState('waiting');
  const paused = s.paused === true;
  if (inPreQueue(st, s, Date.now())) {
    showPreQueue(s);
    if (isCount(s.waiting)) setText(el.waiting, formatCount(s.waiting, lang));
    setText(el.eta, '–');
    setMessage(t('room.msg_pre_queue'), 'pre-queue');
    return;
  }
  if (isCount(s.position)) {
    const pos = s.position;
    // The draw's announcement says the position already: saying it again
    // (queued behind it, ten seconds later) would only repeat it.
    const { justDrawn, progress } = notePosition(st, pos);
    if (justDrawn) {
      if (el.opening) el.opening.hidden = true;
      say(t('room.announce_drawn', { n: pos }), true);
    }
    setPosition(String(pos), false);
    setProgress(progress);
    if (!justDrawn) say(t('room.announce_position', { n: pos }), false);
  } else if (s.queue_method === 'random') {
    // A random line has no order: the wait is expected, not counted down.
    setPosition(t('room.position_random'), true);
  }
  if (isCount(s.waiting)) setText(el.waiting, formatCount(s.waiting, lang));
  setText(el.eta, formatEta(s.eta_seconds, paused));
  if (paused) setMessage(t('room.msg_paused'), 'paused');
  else setMessage(t('room.msg_waiting'), 'waiting');
}

function onAdmitted(s) {
  if (st.done) return;
  st.done = true;
  stopAll();
  setPageState('admitted');
  setConnection('done');
  setProgress(100);
  setPosition('✓', false);
  setText(el.eta, '–');
  showJoinAgain(false);
  const url = safeRedirect(s.redirect_url);
  if (url) {
    if (el.cont) { el.cont.href = url; el.cont.hidden = false; }
    // Send the visitor on once per pass: coming back to this page (the back
    // button) shows the link instead of bouncing them forward again, and
    // says so rather than promising a redirect that will not come.
    const key = 'wr-sent:' + room + ':' + url;
    let sent = false;
    try { sent = sessionStorage.getItem(key) === '1'; sessionStorage.setItem(key, '1'); } catch (e) { /* storage off */ }
    const text = sent ? t('room.msg_admitted_back') : t('room.msg_admitted');
    setMessage(text, 'admitted');
    say(text, true);
    if (!sent) setTimeout(function () { location.assign(url); }, REDIRECT_DELAY_MS);
  } else {
    setMessage(t('room.msg_admitted_no_link'), 'admitted');
    say(t('room.msg_admitted_no_link'), true);
  }
}

function onFinished(text, state, canRejoin) {
  st.done = true;
  stopAll();
  setPageState(state === 'closed' ? 'closed' : 'lost');
  setConnection('done');
  setText(el.eta, '–');
  setMessage(text, state);
  say(text, true);
  showJoinAgain(canRejoin);
}

// The client has stopped by itself (the place ended); the page's timers too.
function stopAll() {
  hidePreQueue();
}

// --- the place, as waitroom-client.js follows it ---------------------------
// Join refusals that end the page, by code (a 404 is any unknown room).
function onRefused(r) {
  if (r.status === 401) {
    onFinished(r.code === 'invalid_user_token' ? t('room.msg_sign_in_again') : t('room.msg_sign_in'), 'closed', false);
    if (el.signIn) el.signIn.hidden = false;
    return;
  }
  if (r.status === 404) { onFinished(t('room.msg_not_found'), 'closed', false); return; }
  if (r.code === 'room_not_accepting') { onFinished(t('room.msg_not_accepting'), 'closed', false); return; }
  if (r.code === 'code_required') { onFinished(t('room.msg_code_required'), 'closed', false); return; }
  if (r.code === 'invalid_code') { onFinished(t('room.msg_invalid_code'), 'closed', false); return; }
  if (r.code === 'code_used') { onFinished(t('room.msg_code_used'), 'closed', false); return; }
  onFinished(t('room.msg_closed'), 'closed', false); // room_closed: nothing to retry
}

function onRetry(r) {
  if (r.reason === 'rate_limited') setMessage(t('room.msg_rate_limited', { n: Math.round(r.inMs / 1000) }), 'retrying');
  else setMessage(t('room.msg_retrying'), 'retrying');
}

let place = null;

// "Notify me": its requests' answers are statuses like any other.
const notify = room ? setUpNotify({
  room,
  onStatus: handleStatus,
  onChange: function (on) { st.notify = on; showKeptAway(); }
}) : null;

// A push arrived (the service worker says so): ask where the place stands
// now rather than at the next poll.
if (room && 'serviceWorker' in navigator) {
  navigator.serviceWorker.addEventListener('message', function (event) {
    const m = event.data;
    if (m && m.type === 'waitroom-push' && m.room === room && place && typeof place.retryNow === 'function') place.retryNow(false);
  });
}

function joinAgain() {
  startOver(st);
  showJoinAgain(false);
  if (el.cont) el.cont.hidden = true;
  setPosition('–', false);
  setProgress(0);
  setPageState('joining');
  setMessage(t('room.msg_joining'), 'joining');
  place.rejoin();
}

if (el.joinAgain) el.joinAgain.addEventListener('click', joinAgain);

// Back from the site after the redirect, restored as it was left: the
// redirect is done, so the page offers the link and says so.
window.addEventListener('pageshow', function (event) {
  if (event.persisted && body.getAttribute('data-state') === 'admitted' && el.cont && !el.cont.hidden) {
    setMessage(t('room.msg_admitted_back'), 'admitted');
  }
});

if (room) {
  place = joinRoom({
    room,
    user: userToken,
    code: priorityCode,
    returnUrl: returnTo,
    returning: body.hasAttribute('data-returning'),
    // This page is on the waiting room's own origin: its cookie always
    // goes with the socket, and no ticket need be put anywhere else.
    cookieSocket: true,
    onStatus: handleStatus,
    onConnection: setConnection,
    onRefused,
    onRetry,
    onChallenge: function () { setMessage(t('room.msg_checking'), 'checking'); },
    solvePow: solveInWorker
  });
}
