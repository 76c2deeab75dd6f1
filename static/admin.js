// Operator page: refreshes the live figures every second from
// /api/admin/rooms (the session cookie authenticates it), keeps the edit forms
// in step with config changed elsewhere without touching a field the
// operator is editing, follows each room's sale (stock left, holds, orders),
// and asks before closing a room or replacing a sale. Each room's chart
// starts from the node's hour of history (admin-chart.js draws it). The
// forms themselves post normally, with their CSRF field; a field the server
// refused is focused. Its state lives in admin-state.js, the preview of
// each room's waiting page in admin-preview.js, a drop's schedule and
// autotune in admin-drop.js.
import { $, isNonNegative, pad2 } from './lib-dom.js';
import { request, backoff, errorMessage } from './lib-api.js';
import { t } from './lib-i18n.js';
import { drawRoom } from './admin-chart.js';
import { createAdminState, recordSample, seedHistory, saleCheckDue, noteNoSale, noteSale, noteServerNow, clockOffset } from './admin-state.js';
import { showDrop } from './admin-drop.js';
import { startPreviews, redraw } from './admin-preview.js';

const REFRESH_MS = 1000;
const RETRY = { base: REFRESH_MS, max: 15000, cap: 4 };
// Rooms without a sale are asked again only every few seconds.
const NO_SALE_RECHECK_MS = 5000;
const STATS = ['pre_queue', 'waiting', 'priority_waiting', 'active', 'admitted_total', 'admitted_last_minute', 'oldest_wait_seconds', 'turned_away', 'no_shows', 'sessions_lapsed', 'bypassed'];

const live = $('live-status');
const st = createAdminState();

// --- view -------------------------------------------------------------------
// A wait in whole seconds, short: "42 s", "3 min 05 s", "2 h 7 min".
function shortDuration(s) {
  if (s < 60) return t('admin.wait_seconds', { s });
  const m = Math.floor(s / 60);
  if (m < 60) return t('admin.wait_minutes', { m, s: pad2(s % 60) });
  return t('admin.wait_hours', { h: Math.floor(m / 60), m: m % 60 });
}

function setLive(state, text) {
  if (!live) return;
  live.setAttribute('data-state', state);
  if (live.textContent !== text) live.textContent = text;
}

// The nodes of one room carrying `[attr="value"]`.
function roomNodes(roomId, attr, value) {
  const all = document.querySelectorAll('[' + attr + '="' + value + '"]');
  const out = [];
  for (let i = 0; i < all.length; i++) {
    if (all[i].getAttribute('data-room') === roomId) out.push(all[i]);
  }
  return out;
}

function cells(roomId, stat) {
  return roomNodes(roomId, 'data-stat', stat);
}

function setCell(node, text, value) {
  if (node.textContent !== text) {
    node.textContent = text;
    node.classList.remove('changed');
    void node.offsetWidth; // restart the highlight animation
    node.classList.add('changed');
  }
  if (value !== undefined) node.setAttribute('data-value', String(value));
}

function setPausedCell(node, paused, closed) {
  const label = closed ? 'closed' : (paused ? 'paused' : 'running');
  const text = closed ? t('admin.state_closed') : (paused ? t('admin.state_paused') : t('admin.state_running'));
  let badge = node.querySelector('.badge');
  if (!badge) {
    badge = document.createElement('span');
    node.textContent = '';
    node.appendChild(badge);
  }
  badge.className = 'badge badge-' + label;
  if (badge.textContent !== text) badge.textContent = text;
  node.setAttribute('data-value', String(!!paused));
}

// A field counts as being edited while it has focus or while its value
// differs from the value the page last got from the server.
function editing(input) {
  if (input === document.activeElement) return true;
  if (input.tagName === 'SELECT') {
    for (let i = 0; i < input.options.length; i++) {
      const o = input.options[i];
      if (o.selected !== o.defaultSelected) return true;
    }
    return false;
  }
  return input.value !== input.defaultValue;
}

function syncField(form, name, value) {
  const input = form.elements.namedItem(name);
  if (!input || !input.tagName || editing(input)) return; // no tagName: several fields share the name
  // A list (bypass_networks) is edited one entry a line.
  const text = value === null || value === undefined ? '' : Array.isArray(value) ? value.join('\n') : String(value);
  if (input.tagName === 'SELECT') {
    for (let i = 0; i < input.options.length; i++) {
      const o = input.options[i];
      const sel = o.value === text;
      o.defaultSelected = sel;
      o.selected = sel;
    }
  } else if (input.value !== text) {
    input.defaultValue = text;
    input.value = text;
  }
}

// Every field of a room's edit form, as the room now has it: the form's
// inputs are named as the config's fields (the page's as `page_title`, …),
// so the form itself says which to follow.
function syncForm(form, r) {
  const page = r.page && typeof r.page === 'object' ? r.page : null;
  const names = new Set();
  for (const input of form.elements) if (input.name) names.add(input.name);
  for (const name of names) {
    if (name.startsWith('page_')) {
      if (page) syncField(form, name, page[name.slice(5)]);
    } else if (Object.prototype.hasOwnProperty.call(r, name)) {
      syncField(form, name, r[name]);
    }
  }
  if (page) redraw(form);
}

// --- live room figures ---------------------------------------------------------
function apply(data) {
  const rooms = data && Array.isArray(data.rooms) ? data.rooms : [];
  const seen = {};
  let unknown = 0;
  for (const r of rooms) {
    if (!r || typeof r.id !== 'string') continue;
    seen[r.id] = true;
    const row = $('row-' + r.id);
    if (!row) { unknown++; continue; }
    row.classList.toggle('is-closed', r.closed === true);
    const stats = r.stats && typeof r.stats === 'object' ? r.stats : {};
    const now = Date.now();
    const figures = Object.assign({}, stats, { max_active: r.max_active });
    const offset = clockOffset(st, r.id);
    drawRoom(r.id, recordSample(st, r.id, figures, now), figures, now, offset);
    showDrop(r, now - offset);
    for (const name of STATS) {
      const v = stats[name];
      if (!isNonNegative(v)) continue;
      const text = name === 'oldest_wait_seconds' ? shortDuration(Math.floor(v)) : String(v);
      cells(r.id, name).forEach((c) => setCell(c, text, v));
    }
    if (r.draw && typeof r.draw === 'object') {
      roomNodes(r.id, 'data-draw', 'entrants').forEach((c) => setCell(c, String(r.draw.entrants), r.draw.entrants));
      if (typeof r.draw.seed === 'string') {
        roomNodes(r.id, 'data-draw', 'seed').forEach((c) => { if (c.textContent !== r.draw.seed) c.textContent = r.draw.seed; });
      }
    }
    if (typeof r.paused === 'boolean') {
      cells(r.id, 'paused').forEach((c) => setPausedCell(c, r.paused, r.closed === true));
    }
    if (typeof r.name === 'string') {
      cells(r.id, 'name').forEach((c) => { if (c.textContent !== r.name) c.textContent = r.name; });
    }
    const form = $('edit-' + r.id);
    if (form) syncForm(form, r);
  }
  let gone = 0;
  const rows = document.querySelectorAll('tr[data-room]');
  for (let n = 0; n < rows.length; n++) {
    const missing = !seen[rows[n].getAttribute('data-room')];
    rows[n].classList.toggle('is-gone', missing);
    if (missing) gone++;
  }
  const time = new Date().toLocaleTimeString();
  if (unknown || gone) {
    setLive('changed', t('admin.live_changed', { time }));
  } else {
    setLive('live', t('admin.live_updated', { time }));
  }
}

function schedule(ms) {
  if (!st.stopped) setTimeout(refresh, ms);
}

function refresh() {
  request('GET', '/api/admin/rooms', { cache: 'no-store' }).then(function (res) {
    if (res.status === 401) {
      st.stopped = true;
      setLive('expired', '');
      if (live) {
        live.textContent = t('admin.live_expired');
        const a = document.createElement('a');
        a.href = '/admin';
        a.textContent = t('admin.live_log_in_again');
        live.appendChild(a);
        live.appendChild(document.createTextNode(t('admin.live_expired_end')));
      }
      return;
    }
    if (!res.ok || !res.parsed) throw new Error('HTTP ' + res.status);
    st.failures = 0;
    try { apply(res.body); } catch (e) { /* never let one odd answer stop the updates */ }
    schedule(REFRESH_MS);
  }).catch(function () {
    st.failures++;
    setLive('error', t('admin.live_unavailable'));
    schedule(backoff(st.failures, RETRY));
  });
}

// Each chart starts with the hour of history the node kept of its room;
// the page's own samples follow it (the next refresh draws them together).
function loadHistories() {
  const charts = document.querySelectorAll('svg[data-chart-room]');
  for (let i = 0; i < charts.length; i++) {
    const room = charts[i].getAttribute('data-chart-room');
    // The node's clock as it made the page, until its history says it again.
    noteServerNow(st, room, charts[i].getAttribute('data-server-now'), Date.now());
    request('GET', '/api/admin/rooms/' + encodeURIComponent(room) + '/history', { cache: 'no-store' })
      .then(function (res) {
        if (res.ok && res.parsed) seedHistory(st, room, res.body, Date.now());
      })
      .catch(function () { /* the chart starts from the page's own samples */ });
  }
}

// --- sales behind the gate ---------------------------------------------------
// Each room's sale figures, once a second: what is left and held from the
// public sale view, the orders from the operator API.
const saleSections = document.querySelectorAll('.sale-admin[data-room]');

function setSaleStat(roomId, stat, text, value) {
  roomNodes(roomId, 'data-sale-stat', stat).forEach((c) => setCell(c, text, value));
}

function setSaleKind(roomId, kind) {
  const lists = document.querySelectorAll('.sale-stats[data-room]');
  for (let i = 0; i < lists.length; i++) {
    if (lists[i].getAttribute('data-room') === roomId) lists[i].setAttribute('data-sale', kind);
  }
}

// {status, body}: body null for 401 and 404; rejects on other failures.
function getJson(url) {
  return request('GET', url, { cache: 'no-store' }).then(function (res) {
    if (res.status === 404 || res.status === 401) return { status: res.status, body: null };
    if (!res.ok || !res.parsed) throw new Error('HTTP ' + res.status);
    return { status: res.status, body: res.body };
  });
}

function applySale(roomId, view) {
  const kind = view && view.kind === 'seats' ? 'seats' : 'stock';
  setSaleKind(roomId, kind);
  if (isNonNegative(view.stock_left)) setSaleStat(roomId, 'stock_left', String(view.stock_left), view.stock_left);
  if (kind === 'seats') {
    let held = 0;
    const seats = view.seats && typeof view.seats === 'object' ? view.seats : {};
    for (const k in seats) if (Object.prototype.hasOwnProperty.call(seats, k) && seats[k] === 'held') held++;
    setSaleStat(roomId, 'held', String(held), held);
  } else {
    // A stock sale lists no claims: its holds cannot be counted from here.
    setSaleStat(roomId, 'held', '–', '');
  }
  const form = $('sale-' + roomId);
  if (form) {
    form.setAttribute('data-sale', kind);
    if (isNonNegative(view.per_user_limit)) syncField(form, 'per_user_limit', view.per_user_limit);
    if (isNonNegative(view.hold_ttl_s)) syncField(form, 'hold_ttl_s', view.hold_ttl_s);
  }
}

function noSale(roomId) {
  setSaleKind(roomId, 'none');
  setSaleStat(roomId, 'stock_left', t('admin.sale_none'), '');
  setSaleStat(roomId, 'held', '–', '');
  setSaleStat(roomId, 'orders', '–', '');
  const form = $('sale-' + roomId);
  if (form) form.setAttribute('data-sale', 'none');
}

function refreshSale(roomId) {
  if (!saleCheckDue(st, roomId, Date.now())) return Promise.resolve();
  const enc = encodeURIComponent(roomId);
  return getJson('/api/rooms/' + enc + '/sale').then(function (res) {
    if (res.status === 404 || !res.body) {
      noSale(roomId);
      noteNoSale(st, roomId, Date.now(), NO_SALE_RECHECK_MS);
      return null;
    }
    noteSale(st, roomId);
    applySale(roomId, res.body);
    return getJson('/api/admin/rooms/' + enc + '/sale/orders');
  }).then(function (res) {
    if (!res) return;
    if (res.status === 401) { st.saleStopped = true; return; }
    if (res.status === 404 || !res.body) { setSaleStat(roomId, 'orders', '–', ''); return; }
    const n = Array.isArray(res.body.orders) ? res.body.orders.length : null;
    if (n !== null) setSaleStat(roomId, 'orders', String(n), n);
  });
}

function refreshSales() {
  if (st.saleStopped || st.stopped) return;
  const jobs = [];
  for (let i = 0; i < saleSections.length; i++) {
    const id = saleSections[i].getAttribute('data-room');
    if (id) jobs.push(refreshSale(id));
  }
  Promise.all(jobs).then(function () {
    st.saleFailures = 0;
    setTimeout(refreshSales, REFRESH_MS);
  }, function () {
    st.saleFailures++;
    setTimeout(refreshSales, backoff(st.saleFailures, RETRY));
  });
}

// --- forms ---------------------------------------------------------------------
// A sale needs a stock count or seats, not both; and setting up a sale
// again replaces the old one, holds and orders included.
function guardSaleForm(form) {
  const stock = form.elements.namedItem('stock');
  const seats = form.elements.namedItem('seats');
  function check() {
    const hasStock = stock.value.trim() !== '';
    const hasSeats = seats.value.trim() !== '';
    const msg = hasStock && hasSeats ? t('admin.sale_both')
      : (!hasStock && !hasSeats ? t('admin.sale_neither') : '');
    stock.setCustomValidity(msg);
    return msg === '';
  }
  stock.addEventListener('input', check);
  seats.addEventListener('input', check);
  form.addEventListener('submit', function (ev) {
    if (!check()) {
      ev.preventDefault();
      if (form.reportValidity) form.reportValidity();
      return;
    }
    const kind = form.getAttribute('data-sale');
    if (kind === 'seats' || kind === 'stock') {
      const room = form.getAttribute('data-room') || '';
      if (!window.confirm(t('admin.sale_replace_confirm', { room }))) {
        ev.preventDefault();
      }
    }
  });
}
document.querySelectorAll('form.sale-form').forEach(guardSaleForm);

// Ask before closing a room.
document.querySelectorAll('form.close-form').forEach(function (form) {
  form.addEventListener('submit', function (ev) {
    const room = form.getAttribute('data-room') || '';
    if (!window.confirm(t('admin.close_confirm', { room }))) {
      ev.preventDefault();
    }
  });
});

// Don't send a double submit.
const forms = document.querySelectorAll('form');
forms.forEach(function (form) {
  form.addEventListener('submit', function (ev) {
    if (ev.defaultPrevented) return;
    if (form.getAttribute('data-sent') === '1') { ev.preventDefault(); return; }
    form.setAttribute('data-sent', '1');
  });
});

window.addEventListener('pageshow', function () {
  forms.forEach((form) => form.removeAttribute('data-sent'));
});

// A refused form comes back as the server renders it, from the room as it
// is: what the operator typed in its other fields would be lost. A form's
// entries are kept for the one page load that follows its submit, and put
// back when that load names a refusal in that very form.
const KEPT = 'wr-admin-kept-form';
forms.forEach(function (form) {
  if (!form.id || form.classList.contains('codes-form')) return;
  form.addEventListener('submit', function (ev) {
    if (ev.defaultPrevented) return;
    const fields = {};
    form.querySelectorAll('input, select, textarea').forEach(function (el) {
      if (!el.name || el.type === 'hidden' || el.type === 'password') return;
      fields[el.name] = el.type === 'checkbox' ? el.checked : el.value;
    });
    try {
      sessionStorage.setItem(KEPT, JSON.stringify({ form: form.id, fields }));
    } catch (e) { /* storage off: the form comes back as stored */ }
  });
});
function restoreKept(refusedField) {
  let kept = null;
  try {
    kept = JSON.parse(sessionStorage.getItem(KEPT) || 'null');
    sessionStorage.removeItem(KEPT);
  } catch (e) { return; }
  const form = refusedField && refusedField.form;
  if (!kept || !form || form.id !== kept.form) return;
  Object.keys(kept.fields).forEach(function (name) {
    const el = form.elements.namedItem(name);
    if (!el || !el.tagName) return;
    if (el.type === 'checkbox') el.checked = kept.fields[name];
    else el.value = kept.fields[name];
    // The live preview follows its fields' input events.
    el.dispatchEvent(new Event('input', { bubbles: true }));
  });
}

startPreviews();
// --- priority codes ------------------------------------------------------------
// Each room's groups of codes, read from the operator API (never the codes
// themselves); a group is added with given codes or generated ones, which
// are offered once as a CSV download, and removed after a confirmation.
// Calls that change something carry the session's CSRF token.
const csrfField = document.querySelector('input[name="csrf"]');
const CSRF = csrfField ? { 'X-CSRF-Token': csrfField.value } : {};

function codesUrl(roomId, group) {
  const base = '/api/admin/rooms/' + encodeURIComponent(roomId) + '/codes';
  return group === undefined ? base : base + '/' + encodeURIComponent(group);
}

function cell(text, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  td.textContent = text;
  return td;
}

function showGroups(roomId, groups) {
  const body = $('codes-' + roomId + '-groups');
  if (!body) return;
  body.textContent = '';
  if (!groups.length) {
    const row = document.createElement('tr');
    const none = cell(t('admin.codes_none'), 'hint');
    none.colSpan = 5;
    row.appendChild(none);
    body.appendChild(row);
    return;
  }
  groups.forEach(function (g) {
    const row = document.createElement('tr');
    row.setAttribute('data-group', g.group);
    const name = document.createElement('th');
    name.scope = 'row';
    name.textContent = g.group;
    row.appendChild(name);
    row.appendChild(cell(String(g.priority), 'num'));
    row.appendChild(cell(String(g.uses), 'num'));
    row.appendChild(cell(g.used + ' / ' + g.total, 'num'));
    const actions = document.createElement('td');
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'button danger small';
    remove.textContent = t('admin.codes_remove');
    remove.addEventListener('click', function () {
      if (!window.confirm(t('admin.codes_remove_confirm', { group: g.group }))) return;
      request('DELETE', codesUrl(roomId, g.group), { headers: CSRF }).then(function () {
        loadGroups(roomId);
      });
    });
    actions.appendChild(remove);
    row.appendChild(actions);
    body.appendChild(row);
  });
}

function loadGroups(roomId) {
  return request('GET', codesUrl(roomId), { cache: 'no-store' }).then(function (res) {
    if (res.ok && res.body && Array.isArray(res.body.groups)) showGroups(roomId, res.body.groups);
  });
}

// The generated codes as a CSV file to download, once.
function offerDownload(result, roomId, added) {
  const lines = ['code,group,priority,uses'].concat(added.codes.map(function (code) {
    return code + ',' + added.group + ',' + added.priority + ',' + added.uses;
  }));
  const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/csv' });
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob);
  link.download = 'codes-' + roomId + '-' + added.group + '.csv';
  link.className = 'codes-download';
  link.textContent = t('admin.codes_download', { n: added.codes.length });
  result.appendChild(document.createTextNode(' '));
  result.appendChild(link);
}

function guardCodesForm(form) {
  const roomId = form.getAttribute('data-room') || '';
  const result = $('codes-' + roomId + '-result');
  let sending = false;
  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    if (sending) return;
    sending = true;
    const field = function (name) { return form.elements.namedItem(name).value.trim(); };
    const body = { group: field('group'), priority: Number(field('priority')), uses: Number(field('uses')) };
    const given = field('codes').split(/\s+/).filter(function (c) { return c !== ''; });
    if (field('generate') !== '') body.generate = Number(field('generate'));
    else body.codes = given;
    request('POST', codesUrl(roomId), { body, headers: CSRF }).then(function (res) {
      sending = false;
      form.removeAttribute('data-sent');
      result.textContent = '';
      if (res.status !== 201 || !res.body) {
        result.textContent = t('admin.codes_failed', { message: errorMessage(res) || ('HTTP ' + res.status) });
        result.setAttribute('data-state', 'error');
        return;
      }
      result.setAttribute('data-state', 'added');
      result.textContent = t('admin.codes_added', { group: res.body.group, n: res.body.added });
      if (res.body.codes && res.body.codes.length) offerDownload(result, roomId, res.body);
      form.reset();
      loadGroups(roomId);
    });
  });
  loadGroups(roomId);
}
document.querySelectorAll('form.codes-form').forEach(guardCodesForm);

// A field the server refused is shown next to its message (the template
// marks it aria-invalid and autofocus); bring it into view too.
const refused = document.querySelector('form [aria-invalid="true"]');
restoreKept(refused);
if (refused) {
  refused.focus();
  if (refused.scrollIntoView) refused.scrollIntoView({ block: 'center' });
}

loadHistories();
if ($('rooms-table') || $('no-rooms')) refresh();
if (saleSections.length) refreshSales();
