// "Notify me" on the waiting page (api.md, "Step away: notifications"):
// the visitor asks to be called back when their turn is near, and their
// place is kept while they are away. Through the browser's notifications
// (its permission, the service worker static/notify-sw.js, a push
// subscription under the key of `GET /api/push/key`) and, where the room
// has a webhook, a contact the visitor types; sent to
// `POST /api/rooms/{room}/notify`, taken back with `DELETE`.
// The section shows while the visitor waits; what the request holds comes
// with every status of the HTTP API (`notify`; the socket's frames leave
// it out, so the last one heard holds).
import { $, setText } from './lib-dom.js';
import { t } from './lib-i18n.js';
import { request, errorCode } from './lib-api.js';
import { notifyRequest, applicationServerKey } from './room-state.js';

// The worker's scope is every waiting page (and resume link): the server
// allows it above /static/ with `Service-Worker-Allowed`.
const WORKER = '/static/notify-sw.js';
const SCOPE = '/rooms/';

// Whether this browser can take web pushes at all.
export function pushSupported() {
  return typeof navigator !== 'undefined' && 'serviceWorker' in navigator
    && typeof window.PushManager === 'function' && typeof window.Notification === 'function';
}

// The worker's address: its notifications' words (the worker has no page
// to read them from) in its query, in this page's language.
function workerUrl() {
  const words = new URLSearchParams({
    near: t('room.notify_title_near'),
    near_body: t('room.notify_body_near'),
    admitted: t('room.notify_title_admitted'),
    admitted_body: t('room.notify_body_admitted')
  });
  return WORKER + '?' + words.toString();
}

function sameBytes(a, b) {
  if (!a || !b) return false;
  const x = new Uint8Array(a);
  const y = new Uint8Array(b);
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

// The browser's push subscription for this server: {push} once the
// visitor allows notifications, {refused: 'denied'} when they do not.
async function subscribe() {
  const permission = Notification.permission === 'granted'
    ? 'granted' : await Notification.requestPermission();
  if (permission !== 'granted') return { refused: 'denied' };
  await navigator.serviceWorker.register(workerUrl(), { scope: SCOPE });
  const registration = await navigator.serviceWorker.ready;
  const answer = await request('GET', '/api/push/key');
  const key = answer.ok && answer.body ? applicationServerKey(answer.body.public_key) : null;
  if (!key) throw new Error('no push key');
  let subscription = await registration.pushManager.getSubscription();
  // One made under another key (before the secret's rotation ended) is made anew.
  if (subscription && !sameBytes(subscription.options && subscription.options.applicationServerKey, key)) {
    await subscription.unsubscribe();
    subscription = null;
  }
  if (!subscription) {
    subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  }
  return { push: subscription.toJSON() };
}

// Sets up the section; `onStatus(s)` gets the status a request answers
// with, `onChange(notify)` whether the request holds, when it changes.
// Returns {update(status)}.
export function setUpNotify(options) {
  const el = {
    section: $('notify'),
    on: $('notify-on'),
    off: $('notify-off'),
    contact: $('notify-contact'),
    state: $('notify-state')
  };
  const api = '/api/rooms/' + encodeURIComponent(options.room) + '/notify';
  const canPush = pushSupported();
  // Nothing to be called back with: no section.
  const possible = Boolean(el.section && el.on && (canPush || el.contact));
  let notify = false;
  let waiting = false;
  let busy = false;

  function draw() {
    if (!possible) return;
    el.section.hidden = !waiting;
    el.on.hidden = notify;
    if (el.off) el.off.hidden = !notify;
    el.on.disabled = busy;
    if (el.off) el.off.disabled = busy;
    el.section.setAttribute('data-notify', notify ? 'on' : 'off');
  }

  function tell(text) { setText(el.state, text); }

  function set(now) {
    if (now === notify) return;
    // The button pressed goes away: the focus goes to the one that came.
    const focused = document.activeElement === el.on || document.activeElement === el.off;
    notify = now;
    draw();
    if (focused) (notify ? el.off : el.on)?.focus();
    options.onChange(notify);
  }

  async function turnOn() {
    if (busy) return;
    busy = true;
    draw();
    tell(t('room.notify_asking'));
    const contact = el.contact ? el.contact.value : '';
    let push = null;
    let why = canPush ? '' : 'unsupported';
    if (canPush) {
      try {
        const got = await subscribe();
        push = got.push || null;
        why = got.refused || '';
      } catch (e) { why = 'failed'; }
    }
    const body = notifyRequest(contact, push);
    if (!body) {
      busy = false;
      draw();
      tell(why === 'denied' ? t('room.notify_denied')
        : why === 'unsupported' ? t('room.notify_unsupported') : t('room.notify_failed'));
      return;
    }
    let answer = null;
    try { answer = await request('POST', api, { body }); } catch (e) { /* unreachable */ }
    busy = false;
    if (answer && answer.ok) {
      tell(push ? t('room.notify_on_state') : t('room.notify_contact_state'));
      set(true);
      draw();
      if (answer.body && typeof answer.body === 'object') options.onStatus(answer.body);
      return;
    }
    draw();
    const code = answer ? errorCode(answer) : '';
    if (code === 'too_many_notifications') tell(t('room.notify_too_many'));
    else if (code === 'invalid_notify') tell(t('room.notify_invalid'));
    else tell(t('room.notify_failed'));
  }

  async function turnOff() {
    if (busy) return;
    busy = true;
    draw();
    let answer = null;
    try { answer = await request('DELETE', api); } catch (e) { /* unreachable */ }
    busy = false;
    if (answer && answer.ok) {
      tell(t('room.notify_off_state'));
      set(false);
    } else {
      tell(t('room.notify_failed'));
    }
    draw();
  }

  if (possible) {
    el.on.addEventListener('click', turnOn);
    if (el.off) el.off.addEventListener('click', turnOff);
  }

  return {
    // Every status: the section shows while the visitor waits, and says
    // what their request is when the status tells.
    update(s) {
      waiting = s.state === 'waiting';
      if (typeof s.notify === 'boolean') set(s.notify);
      draw();
    },
    get on() { return notify; }
  };
}
