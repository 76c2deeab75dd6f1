// Waiting page model: the one state object room.js keeps (the ticket, the
// join and its retries, the proof of work, the draw and its countdown, the
// pacing of aria-live announcements) and the changes to it that are
// decisions rather than drawing. Nothing here touches the DOM.
import { isCount } from './lib-dom.js';

// `userToken`: the signed-in customer's token the page arrived with, or null.
// `returnTo`: the page a forward-auth gate sent the visitor here from
// (`?return=`), or null; the server decides whether it may be returned to.
export function createRoomState(userToken, returnTo) {
  return {
    userToken,
    returnTo: typeof returnTo === 'string' && returnTo ? returnTo : null,
    ticket: null,
    joinTimer: null,
    joinAttempt: 0,
    joining: false,
    pow: null,            // a solved challenge for the next join, if the room asks
    powTries: 0,
    done: false,          // terminal state reached: no more reconnecting
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

// What a join sends: the user token, a solved challenge and the return,
// when there are.
export function joinBody(st) {
  const b = st.userToken ? { user: st.userToken } : {};
  if (st.pow) b.pow = st.pow;
  if (st.returnTo) b.return = st.returnTo;
  return b;
}

// A join answered: the challenge is used up (a later join needs a new one,
// if any) and the retries start over.
export function joined(st) {
  st.joining = false;
  st.pow = null;
  st.powTries = 0;
  st.joinAttempt = 0;
}

// "Join again" after leaving or expiring: a new ticket and a new line.
export function startOver(st) {
  st.done = false;
  st.firstPosition = null;
  st.ticket = null;
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
