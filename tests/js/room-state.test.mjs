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
