// The waiting page's decisions that need no DOM (static/room-state.js),
// on a driven clock. Run by tests/browser/page_scripts.rs with `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRoomState, paceAnnouncement } from '../../static/room-state.js';

const GAP = 10_000;
// Times as Date.now() gives them.
const T = 1_767_225_600_000;

test('positions are announced politely: at most one per gap, the latest once it is over', () => {
  const st = createRoomState();
  assert.deepEqual(paceAnnouncement(st, 'Position 40', false, T + 1_000, GAP), { say: true });
  // Every tick moves the place; none of these is said at once.
  for (const [at, n] of [[2_000, 38], [3_000, 36], [4_000, 34]]) {
    const paced = paceAnnouncement(st, 'Position ' + n, false, T + at, GAP);
    assert.equal(paced.say, false, 'tick at ' + at);
    assert.equal(paced.retryInMs, 1_000 + GAP - at);
  }
  assert.equal(st.pendingAnnounce, 'Position 34', 'only the latest waits');
  // The gap over: the latest is said, once.
  assert.deepEqual(paceAnnouncement(st, st.pendingAnnounce, true, T + 11_000, GAP), { say: true });
  assert.deepEqual(paceAnnouncement(st, 'Position 34', false, T + 30_000, GAP), { say: false });
});

test('an urgent announcement (the admission, the draw) is said at once', () => {
  const st = createRoomState();
  paceAnnouncement(st, 'Position 3', false, T + 1_000, GAP);
  assert.deepEqual(paceAnnouncement(st, "It's your turn", true, T + 1_500, GAP), { say: true });
});

test('"Notify me" sends the contact typed and the subscription, whichever there are', async () => {
  const { notifyRequest } = await import('../../static/room-state.js');
  const push = { endpoint: 'https://fcm.googleapis.com/x', expirationTime: null, keys: { p256dh: 'BA', auth: 'AA' } };
  assert.deepEqual(notifyRequest('  me@example.com ', null), { contact: 'me@example.com' });
  assert.deepEqual(notifyRequest('', push), { push: { endpoint: push.endpoint, keys: push.keys } });
  assert.deepEqual(notifyRequest('a', push), { contact: 'a', push: { endpoint: push.endpoint, keys: push.keys } });
  assert.equal(notifyRequest('   ', null), null, 'nothing to call back with');
  assert.equal(notifyRequest(undefined, { keys: {} }), null);
});

test('the away note tells the truth once the visitor asked to be notified', async () => {
  const { keptAwayNote } = await import('../../static/room-state.js');
  assert.deepEqual(keptAwayNote(false, 120, 900), { key: 'room.keep_open', seconds: 120 });
  assert.deepEqual(keptAwayNote(true, 120, 900), { key: 'room.keep_open_notify', seconds: 900 });
});

test('the push key is read from base64url into bytes', async () => {
  const { applicationServerKey } = await import('../../static/room-state.js');
  const key = 'BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8';
  const bytes = applicationServerKey(key);
  assert.equal(bytes.length, 65);
  assert.equal(bytes[0], 4, 'an uncompressed point');
  assert.deepEqual(Array.from(applicationServerKey('AQ')), [1]);
  for (const bad of ['', 'a b', 'AQ==', 'A', null, 42]) assert.equal(applicationServerKey(bad), null, String(bad));
});
