// Sale page seat map: lays the seats out in rows (column-aligned when the
// seat numbers allow), keeps each seat button's state, label and pressed
// state in step with the sale, and picks or unpicks a seat on click. Owns
// the map's layout and its buttons; the choice itself is `app.st.selected`.
import { setText, show } from './lib-dom.js';
import { t } from './lib-i18n.js';
import { canPick, limit, mySeats } from './sale-state.js';
import { render, setMessage, showDefaultMessage, listing } from './sale-view.js';

// Column-aligned seat maps up to this many seats in a row; beyond it seats
// are simply laid out one after another.
const MAX_ALIGNED_COLUMNS = 40;

function parseSeat(id) {
  const m = /^([A-Za-z]*)(\d+)$/.exec(id);
  if (!m) return { row: id, num: NaN };
  return { row: m[1].toUpperCase(), num: parseInt(m[2], 10) };
}

function compareRows(a, b) {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : (a > b ? 1 : 0);
}

// Seat id -> button, after filling `map` with a row of buttons per seat row.
function buildSeatMap(map, ids) {
  const rows = {};
  const order = [];
  let maxNum = 0;
  let maxInRow = 0;
  let aligned = true;
  ids.forEach((id) => {
    const p = parseSeat(id);
    if (!isFinite(p.num)) aligned = false; else maxNum = Math.max(maxNum, p.num);
    if (!rows[p.row]) { rows[p.row] = []; order.push(p.row); }
    rows[p.row].push({ id, num: p.num });
  });
  order.sort(compareRows);
  order.forEach((r) => {
    rows[r].sort((a, b) => {
      if (isFinite(a.num) && isFinite(b.num) && a.num !== b.num) return a.num - b.num;
      return a.id < b.id ? -1 : (a.id > b.id ? 1 : 0);
    });
    maxInRow = Math.max(maxInRow, rows[r].length);
  });
  if (maxNum > MAX_ALIGNED_COLUMNS) aligned = false;
  const cols = aligned ? maxNum : maxInRow;

  map.textContent = '';
  map.style.setProperty('--seat-cols', String(Math.max(1, cols)));
  const buttons = {};
  order.forEach((r) => {
    const row = document.createElement('div');
    row.className = 'seat-row';
    row.setAttribute('role', 'group');
    row.setAttribute('aria-label', r ? t('sale.row_label', { row: r }) : t('sale.seats_group_label'));
    const label = document.createElement('span');
    label.className = 'seat-row-label';
    label.setAttribute('aria-hidden', 'true');
    label.textContent = r && r.length <= 3 ? r : '';
    row.appendChild(label);
    rows[r].forEach((s, i) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'seat';
      b.setAttribute('data-seat', s.id);
      b.setAttribute('aria-pressed', 'false');
      b.textContent = isFinite(s.num) && r.length <= 3 ? String(s.num) : s.id;
      b.style.gridColumn = String((aligned ? s.num : i + 1) + 1);
      row.appendChild(b);
      buttons[s.id] = b;
    });
    map.appendChild(row);
  });
  return buttons;
}

export function createSeatMap(app) {
  const { st, el } = app;
  let layoutKey = '';
  let buttons = {};

  function renderSeats() {
    const seats = st.sale.seats && typeof st.sale.seats === 'object' ? st.sale.seats : {};
    const ids = Object.keys(seats);
    const key = ids.slice().sort().join('\u0000');
    if (key !== layoutKey) {
      layoutKey = key;
      buttons = buildSeatMap(el.seatMap, ids);
    }
    const mine = mySeats(st);
    show(el.legendMine, Object.keys(mine).length > 0);
    const chosen = {};
    st.selected.forEach((s) => { chosen[s] = true; });
    ids.forEach((id) => {
      const b = buttons[id];
      if (!b) return;
      const state = seats[id] === 'held' || seats[id] === 'sold' ? seats[id] : 'free';
      const pressed = state === 'free' && chosen[id] === true;
      if (b.getAttribute('data-state') !== state) b.setAttribute('data-state', state);
      if (mine[id]) b.setAttribute('data-mine', mine[id]); else b.removeAttribute('data-mine');
      b.setAttribute('aria-pressed', pressed ? 'true' : 'false');
      const off = state !== 'free';
      if (b.disabled !== off) b.disabled = off;
      const what = state === 'free' ? (pressed ? t('sale.seat_chosen') : t('sale.seat_free'))
        : mine[id] ? (mine[id] === 'sold' ? t('sale.seat_yours') : t('sale.seat_held_for_you'))
        : state === 'held' ? t('sale.seat_held_by_other') : t('sale.seat_sold');
      b.setAttribute('aria-label', t('sale.seat_aria', { seat: id, state: what }));
      b.title = t('sale.seat_title', { seat: id, state: what });
    });
    const picked = st.selected.slice();
    setText(el.selection, picked.length
      ? t('sale.selection_chosen', { seats: listing(picked), n: picked.length, max: Math.max(picked.length, canPick(st)) })
      : t('sale.selection_none'));
  }

  function toggleSeat(id) {
    if (st.phase !== 'choosing' || st.busy || !st.sale) return;
    const seats = st.sale.seats || {};
    if (seats[id] !== 'free') return;
    const at = st.selected.indexOf(id);
    if (at >= 0) {
      st.selected.splice(at, 1);
    } else {
      const may = canPick(st);
      if (st.selected.length >= may) {
        setMessage(app, may === 0 ? t('sale.msg_limit_reached', { n: limit(st) })
          : may === 1 ? t('sale.msg_max_seats_one', { n: may }) : t('sale.msg_max_seats_many', { n: may }), 'warn');
        return;
      }
      st.selected.push(id);
    }
    st.pendingKey = null;
    render(app);
    showDefaultMessage(app);
  }

  if (el.seatMap) {
    el.seatMap.addEventListener('click', (ev) => {
      let t = ev.target;
      while (t && t !== el.seatMap && !(t.getAttribute && t.getAttribute('data-seat'))) t = t.parentNode;
      if (t && t !== el.seatMap) toggleSeat(t.getAttribute('data-seat'));
    });
  }

  return { render: renderSeats };
}
