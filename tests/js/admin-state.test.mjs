// The operator page's decisions that need no DOM (static/admin-state.js):
// where a schedule's entries stand and whether a pause holds it, as the
// server says it (http::admin::drop_view), and the node's clock against
// the browser's. Run by tests/browser/page_scripts.rs with `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createAdminState, seedHistory, noteServerNow, clockOffset, entryStates, scheduleHeld
} from '../../static/admin-state.js';

// 2026-01-01T00:00:00Z, the tests' start.
const T = 1_767_225_600_000;

const schedule = [
  { at: '2026-01-01T00:00:01Z', set: { admit_per_tick: 40 }, applied_at: '2026-01-01T00:00:01.001Z', error: null },
  { at: '2026-01-01T00:00:02Z', set: { session_idle_s: 300 }, applied_at: null, error: 'session_idle_s must be at most pass_ttl_s' },
  { at: '2026-01-01T01:00:00Z', set: { notice: '<b>Last</b>' }, applied_at: null, error: null },
  { at: '2026-01-01T02:00:00Z', set: { paused: true }, applied_at: null, error: null }
];

test('each entry stands where the page says: applied, skipped, the next one, pending', () => {
  assert.deepEqual(entryStates(schedule, '2026-01-01T01:00:00Z'), ['applied', 'skipped', 'next', 'pending']);
  assert.deepEqual(entryStates(schedule, null), ['applied', 'skipped', 'pending', 'pending']);
  assert.deepEqual(entryStates([], null), []);
});

test("an operator's pause holds the schedule once a pending entry is due", () => {
  assert.equal(scheduleHeld(true, schedule, T + 3_600_000), true);
  assert.equal(scheduleHeld(true, schedule, T + 3_599_999), false, 'nothing pending is due yet');
  assert.equal(scheduleHeld(false, schedule, T + 9_000_000), false, 'not paused');
  assert.equal(scheduleHeld(true, schedule.slice(0, 2), T + 9_000_000), false, 'nothing pending');
});

test("the node's clock: the page's until the history says it", () => {
  const st = createAdminState();
  assert.equal(clockOffset(st, 'drop'), 0);
  noteServerNow(st, 'drop', '2026-01-01T00:00:06Z', T + 106_000);
  assert.equal(clockOffset(st, 'drop'), 100_000);
  noteServerNow(st, 'drop', 'not a time', T);
  assert.equal(clockOffset(st, 'drop'), 100_000);
  seedHistory(st, 'drop', { now: '2026-01-01T00:00:07.000Z', samples: [] }, T + 107_500);
  assert.equal(clockOffset(st, 'drop'), 100_500);
  noteServerNow(st, 'drop', '2026-01-01T00:00:06Z', T + 999_000);
  assert.equal(clockOffset(st, 'drop'), 100_500, 'the history is newer than the page');
});
