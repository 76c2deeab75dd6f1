// Waiting page model: the one state object room.js keeps (whether the
// page is done, the draw and its countdown, the progress bar's start, the
// pacing of aria-live announcements) and the changes to it that are
// decisions rather than drawing. Nothing here touches the DOM; the place
// itself (ticket, join, socket) is waitroom-client.js's.
import { isCount } from './lib-dom.js';

export function createRoomState() {
  return {
    done: false,          // terminal state shown: the page waits for "join again"
    firstPosition: null,  // first position seen, for the progress bar
    opensAt: null,        // the scheduled opening (ms), while in the pre-queue
    countdownTimer: null,
    inDraw: false,        // was in the pre-queue: the first position is the draw's
    drawn: false,         // the draw's position has been shown
    // aria-live announcements: the last one said, when, and one waiting its turn
    lastAnnounced: '',
    lastAnnounceAt: 0,
    announceTimer: null,
    pendingAnnounce: null
  };
}

// "Join again" after leaving or expiring: a new line from the start.
export function startOver(st) {
  st.done = false;
  st.firstPosition = null;
  st.lastAnnounced = '';
}

// In the pre-queue: an entry and no position (a random line has none
// after the opening either, so there the clock tells them apart).
export function inPreQueue(st, s, now) {
  return !st.drawn && !isCount(s.position) && typeof s.entry === 'string' && typeof s.opens_at === 'string'
    && (s.queue_method !== 'random' || Date.parse(s.opens_at) > now);
}

// Enters the pre-queue of a status; true when the countdown timer is still
// to be started.
export function enterPreQueue(st, s) {
  const opensAt = Date.parse(s.opens_at);
  st.inDraw = true;
  st.opensAt = isNaN(opensAt) ? null : opensAt;
  return st.countdownTimer === null;
}

export function leavePreQueue(st) {
  clearInterval(st.countdownTimer);
  st.countdownTimer = null;
  st.opensAt = null;
}

// A position arrived; returns {justDrawn, progress}: whether it is the
// draw's (to be announced as such, once) and the percentage of the line
// behind the visitor since the first position seen.
export function notePosition(st, pos) {
  const justDrawn = st.countdownTimer !== null || (st.inDraw && !st.drawn);
  if (justDrawn) {
    leavePreQueue(st);
    st.drawn = true;
  }
  if (st.firstPosition === null || pos > st.firstPosition) st.firstPosition = pos;
  const progress = st.firstPosition > 0 ? (st.firstPosition - pos) * 100 / st.firstPosition : 0;
  return { justDrawn, progress };
}

// Whether `text` may be said now (urgent, or the gap since the last one is
// over); records it as said when it is new. Otherwise it waits as the
// pending one and the answer is the delay before trying again.
export function paceAnnouncement(st, text, urgent, now, minGapMs) {
  if (urgent || now - st.lastAnnounceAt >= minGapMs) {
    st.pendingAnnounce = null;
    if (text === st.lastAnnounced) return { say: false };
    st.lastAnnounced = text;
    st.lastAnnounceAt = now;
    return { say: true };
  }
  st.pendingAnnounce = text;
  return { say: false, retryInMs: minGapMs - (now - st.lastAnnounceAt) };
}

// --- "Notify me" ------------------------------------------------------------------
// The body of the request to be notified: the contact typed (for the
// room's webhook) and the browser's push subscription, whichever there
// are; null when there is neither (nothing to call back).
export function notifyRequest(contact, push) {
  const body = {};
  const typed = typeof contact === 'string' ? contact.trim() : '';
  if (typed) body.contact = typed;
  if (push && typeof push === 'object' && typeof push.endpoint === 'string') {
    body.push = { endpoint: push.endpoint, keys: push.keys };
  }
  return body.contact === undefined && body.push === undefined ? null : body;
}

// What the note under the line says of an away visitor: the place is
// kept `abandon` seconds while away, or, once they asked to be notified,
// until they are called, and then for `notifyReturn` seconds.
export function keptAwayNote(notify, abandon, notifyReturn) {
  return notify ? { key: 'room.keep_open_notify', seconds: notifyReturn }
    : { key: 'room.keep_open', seconds: abandon };
}

// The VAPID key of `GET /api/push/key` (base64url) as the bytes
// `PushManager.subscribe` takes; null for one that is not base64url.
export function applicationServerKey(text) {
  if (typeof text !== 'string' || !/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((text.length + 3) % 4);
  let raw;
  try { raw = atob(b64); } catch (e) { return null; }
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}
