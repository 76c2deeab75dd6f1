// A drop on the operator page, kept live from the figures admin.js reads
// every second: each room's schedule as the server drew it (each entry's
// status, highlighted when next; the note that an operator's pause holds
// it), and autotune's effective rate, last decision and changes. Text goes
// in as text. A timeline that no longer matches the room's schedule (it
// was replaced) says to reload, rather than guess which entry is which.
import { $, setText, show, isCount } from './lib-dom.js';
import { t } from './lib-i18n.js';
import { entryStates, scheduleHeld } from './admin-state.js';

const TUNE_STATES = {
  cut: () => t('admin.autotune_state_cut'),
  raised: () => t('admin.autotune_state_raised'),
  held: () => t('admin.autotune_state_held'),
  idle: () => t('admin.autotune_state_idle')
};

// Brings a room's timeline and autotune panel up to date with `r` (a room
// of GET /api/admin/rooms); `serverNow` is the node's clock now, in ms.
export function showDrop(r, serverNow) {
  const stats = r.stats && typeof r.stats === 'object' ? r.stats : {};
  showSchedule(r, stats, serverNow);
  showAutotune(r, stats);
}

function entryWords(entry, state) {
  if (state === 'applied') return t('admin.schedule_applied', { time: entry.applied_at });
  if (state === 'skipped') return t('admin.schedule_skipped', { error: String(entry.error) });
  if (state === 'next') return t('admin.schedule_next');
  return t('admin.schedule_pending');
}

function showSchedule(r, stats, serverNow) {
  const list = $('schedule-' + r.id + '-entries');
  if (!list) return;
  const schedule = Array.isArray(r.schedule) ? r.schedule : [];
  const items = list.querySelectorAll('li[data-entry]');
  const same = items.length === schedule.length &&
    schedule.every((entry, i) => entry && items[i].getAttribute('data-at') === entry.at);
  show($('schedule-' + r.id + '-replaced'), !same);
  if (!same) return;
  entryStates(schedule, stats.next_change_at).forEach(function (state, i) {
    const item = items[i];
    if (item.getAttribute('data-state') !== state) {
      item.setAttribute('data-state', state);
      if (state === 'next') item.setAttribute('aria-current', 'step');
      else item.removeAttribute('aria-current');
    }
    setText(item.querySelector('.entry-state'), entryWords(schedule[i], state));
  });
  show($('schedule-' + r.id + '-held'), scheduleHeld(r.paused, schedule, serverNow));
}

function showAutotune(r, stats) {
  const section = $('autotune-' + r.id);
  if (!section) return;
  const part = (name) => section.querySelector('[data-autotune="' + name + '"]');
  if (isCount(stats.admit_per_tick_effective)) {
    setText(part('effective'), String(stats.admit_per_tick_effective));
  }
  const configured = part('configured');
  if (configured && isCount(r.admit_per_tick)) {
    configured.setAttribute('data-value', String(r.admit_per_tick));
    setText(configured, t('admin.autotune_configured', { n: r.admit_per_tick }));
  }
  const tune = stats.autotune && typeof stats.autotune === 'object' ? stats.autotune : null;
  if (!tune) return;
  const state = part('state');
  if (state && Object.prototype.hasOwnProperty.call(TUNE_STATES, tune.state)) {
    state.className = 'badge badge-tune-' + tune.state;
    state.setAttribute('data-value', tune.state);
    setText(state, TUNE_STATES[tune.state]());
  }
  setText(part('reason'), typeof tune.reason === 'string' ? tune.reason : '');
  setText(part('at'), typeof tune.at === 'string' ? tune.at : '');
  if (Array.isArray(tune.changes)) showChanges(part('changes'), part('changes_count'), tune.changes);
}

// The changes, newest first, written again only when they changed.
function showChanges(list, count, changes) {
  if (!list) return;
  const newest = changes.slice().reverse();
  const first = list.firstElementChild;
  const firstAt = first ? first.getAttribute('data-at') : null;
  if (list.children.length === newest.length && (newest.length === 0 || firstAt === newest[0].at)) return;
  list.textContent = '';
  for (const change of newest) {
    const item = document.createElement('li');
    item.setAttribute('data-at', String(change.at));
    item.setAttribute('data-from', String(change.from));
    item.setAttribute('data-to', String(change.to));
    item.textContent = t('admin.autotune_change', {
      time: change.at, from: change.from, to: change.to, reason: String(change.reason || '')
    });
    list.appendChild(item);
  }
  if (count) {
    count.setAttribute('data-value', String(newest.length));
    setText(count, t('admin.autotune_changes', { n: newest.length }));
  }
}
