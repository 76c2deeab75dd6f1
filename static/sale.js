// Sale page: what an admitted visitor sees behind the gate. Shows what is
// left (a seat map or a quantity), holds a choice for a few minutes, counts
// the hold down, and confirms it into a numbered ticket. The pass travels in
// the HttpOnly `wr_pass` cookie, so every call here is same-origin.
// No framework; runs in any browser from the last few years.
(function () {
  'use strict';

  var REFRESH_MS = 2000;
  var HIDDEN_REFRESH_MS = 10000;
  var MAX_BACKOFF_MS = 15000;
  var URGENT_S = 30;
  // Column-aligned seat maps up to this many seats in a row; beyond it seats
  // are simply laid out one after another.
  var MAX_ALIGNED_COLUMNS = 40;

  var body = document.body;
  var room = body.getAttribute('data-room') || '';
  var base = '/api/rooms/' + encodeURIComponent(room) + '/sale';

  function $(id) { return document.getElementById(id); }

  var el = {
    heading: $('sale-heading'),
    message: $('sale-message'),
    back: $('back-to-room'),
    choose: $('choose-panel'),
    chooseTitle: $('choose-title'),
    stockLeft: $('stock-left'),
    stockLeftLabel: $('stock-left-label'),
    limitNote: $('limit-note'),
    seatPicker: $('seat-picker'),
    seatMap: $('seat-map'),
    selection: $('selection'),
    stockPicker: $('stock-picker'),
    quantity: $('quantity'),
    hold: $('hold'),
    holdHint: $('hold-hint'),
    holdPanel: $('hold-panel'),
    heldWhat: $('held-what'),
    countdown: $('countdown'),
    confirm: $('confirm'),
    release: $('release'),
    ticket: $('ticket'),
    ticketSequence: $('ticket-sequence'),
    ticketWhat: $('ticket-what'),
    ticketWhen: $('ticket-when'),
    otherTickets: $('other-tickets'),
    buyMore: $('buy-more')
  };
  var legendMine = $('legend-mine');

  // --- state ----------------------------------------------------------------
  // loading | choosing | holding | confirmed | nosale | nopass
  var phase = 'loading';
  var sale = null;          // the last sale view
  var claim = null;         // the held claim in the hold panel
  var tickets = [];         // confirmed claims, in order of sequence
  var dropped = {};         // claim ids released or expired here: never resumed
  var selected = [];        // seat ids, in the order they were picked
  var busy = false;         // a hold, confirm or release is on its way
  var epoch = 0;            // bumped around every change; older refreshes are dropped
  var pendingKey = null;    // Idempotency-Key of a hold whose answer never came
  var pendingFor = '';      // ...and what it asked for
  var seatLayoutKey = '';
  var seatButtons = {};
  var refreshTimer = null;
  var refreshing = false;
  var failures = 0;
  var offlineShown = false;
  // A message that says what just happened stays until the visitor acts;
  // otherwise the message is the phase's hint and follows the figures.
  var noticeShown = false;

  // Server clock minus this browser's clock. Holds end on the server's clock,
  // so the countdown is shifted by this much.
  var offsetMs = 0;
  var offsetSource = 'none'; // none | date | claim | server
  var deadline = 0;          // the hold's end, on this browser's clock
  var countdownTimer = null;
  var warnedMinute = false;
  var expiryChecked = false;

  // --- small helpers --------------------------------------------------------
  function setText(node, text) {
    if (node && node.textContent !== text) node.textContent = text;
  }

  function show(node, visible) {
    if (node) node.hidden = !visible;
  }

  function setMessage(text, state) {
    noticeShown = true;
    if (!el.message) return;
    el.message.setAttribute('data-state', state || 'info');
    setText(el.message, text);
  }

  function isCount(v) {
    return typeof v === 'number' && isFinite(v) && v >= 0 && Math.floor(v) === v;
  }

  function plural(n, one, many) {
    return n + ' ' + (n === 1 ? one : many);
  }

  function listing(items) {
    if (items.length <= 1) return items.join('');
    return items.slice(0, -1).join(', ') + ' and ' + items[items.length - 1];
  }

  function newKey() {
    var c = window.crypto;
    try {
      if (c && typeof c.randomUUID === 'function') return c.randomUUID();
    } catch (e) { /* not a secure context */ }
    if (c && typeof c.getRandomValues === 'function') {
      var bytes = new Uint8Array(16);
      c.getRandomValues(bytes);
      var hex = '';
      for (var i = 0; i < bytes.length; i++) hex += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
      return hex;
    }
    return Date.now().toString(36) + '-' + Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
  }

  function errorCode(res) {
    var e = res.body && res.body.error;
    return e && typeof e.code === 'string' ? e.code : '';
  }

  function errorText(res) {
    var e = res.body && res.body.error;
    return e && typeof e.message === 'string' ? e.message : '';
  }

  // One JSON call. Resolves to {status, ok, body} for any HTTP answer;
  // rejects only when the server could not be reached.
  function api(method, url, payload, headers) {
    var h = { 'Accept': 'application/json' };
    if (payload !== undefined) h['Content-Type'] = 'application/json';
    if (headers) for (var k in headers) if (Object.prototype.hasOwnProperty.call(headers, k)) h[k] = headers[k];
    var sent = Date.now();
    return fetch(url, {
      method: method,
      credentials: 'same-origin',
      cache: 'no-store',
      headers: h,
      body: payload === undefined ? undefined : JSON.stringify(payload)
    }).then(function (res) {
      var got = Date.now();
      if (offsetSource === 'none') {
        var date = Date.parse(res.headers.get('Date') || '');
        if (isFinite(date)) offsetMs = date - (sent + got) / 2;
      }
      if (res.status === 204) return { status: 204, ok: true, body: null, sent: sent, got: got };
      return res.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        return { status: res.status, ok: res.ok, body: data, sent: sent, got: got };
      });
    });
  }

  function learnServerTime(data, res) {
    var t = data && typeof data.server_time === 'string' ? Date.parse(data.server_time) : NaN;
    if (isFinite(t)) {
      offsetMs = t - (res.sent + res.got) / 2;
      offsetSource = 'server';
    }
  }

  // --- claims -----------------------------------------------------------------
  function units(c) {
    if (isCount(c.quantity) && c.quantity > 0) return c.quantity;
    return Array.isArray(c.seats) ? c.seats.length : 0;
  }

  function describe(c) {
    var seats = Array.isArray(c.seats) ? c.seats.filter(function (s) { return typeof s === 'string'; }) : [];
    if (seats.length) return (seats.length === 1 ? 'Seat ' : 'Seats ') + listing(seats);
    var n = units(c);
    return plural(n, 'item', 'items');
  }

  function isSeatSale() {
    return !!sale && sale.kind === 'seats';
  }

  function mineHeldUnits() {
    var n = 0;
    var mine = sale && Array.isArray(sale.mine) ? sale.mine : [];
    for (var i = 0; i < mine.length; i++) {
      var c = mine[i];
      if (!c) continue;
      if (c.state === 'confirmed' || (c.state === 'held' && !dropped[c.claim_id])) n += units(c);
    }
    // A claim this page knows of that the last view did not list yet.
    if (claim && !mine.some(function (c) { return c && c.claim_id === claim.claim_id; })) n += units(claim);
    tickets.forEach(function (t) {
      if (!mine.some(function (c) { return c && c.claim_id === t.claim_id; })) n += units(t);
    });
    return n;
  }

  function limit() {
    return sale && isCount(sale.per_user_limit) ? sale.per_user_limit : 1;
  }

  function canPick() {
    return Math.max(0, limit() - mineHeldUnits());
  }

  function stockLeft() {
    if (!sale) return 0;
    if (isCount(sale.stock_left)) return sale.stock_left;
    var n = 0;
    var seats = sale.seats || {};
    for (var k in seats) if (seats[k] === 'free') n++;
    return n;
  }

  function addTicket(c) {
    if (!c || typeof c.claim_id !== 'string') return;
    for (var i = 0; i < tickets.length; i++) {
      if (tickets[i].claim_id === c.claim_id) { tickets[i] = c; return; }
    }
    tickets.push(c);
    tickets.sort(function (a, b) { return (a.sequence || 0) - (b.sequence || 0); });
  }

  // --- phases -----------------------------------------------------------------
  function setPhase(next) {
    phase = next;
    body.setAttribute('data-phase', next);
    render();
  }

  function renderHeading() {
    var next = phase;
    var heading = {
      loading: "You're in",
      choosing: isSeatSale() ? 'Choose your seats' : 'How many would you like?',
      holding: 'Confirm your purchase',
      confirmed: "You've got it",
      nosale: 'No sale here right now',
      nopass: 'Your pass is missing or expired'
    }[next];
    if (next === 'choosing' && sale && stockLeft() === 0) heading = 'Sold out';
    else if (next === 'choosing' && tickets.length) heading = isSeatSale() ? 'Choose more seats' : 'Get more';
    setText(el.heading, heading || '');
  }

  function defaultMessage() {
    if (phase !== 'choosing') return null;
    var left = stockLeft();
    var may = canPick();
    if (left === 0) return ['Sold out: everything is held or sold. Held items come back if they are not bought in time, so keep this page open.', 'warn'];
    if (may === 0) return ['You have reached the limit of ' + limit() + ' per person.', 'warn'];
    if (isSeatSale()) {
      var more = Math.min(may, left) - selected.length;
      if (selected.length && more > 0) return ['Press Hold to keep your choice, or pick up to ' + more + ' more.', 'info'];
      if (selected.length) return ['Press Hold to keep your choice.', 'info'];
      return ['Pick up to ' + plural(Math.min(may, left), 'seat', 'seats') + ', then press Hold.', 'info'];
    }
    return ['Choose how many, then press Hold.', 'info'];
  }

  function showDefaultMessage() {
    var m = defaultMessage();
    if (m) setMessage(m[0], m[1]);
    noticeShown = false;
  }

  // --- rendering ----------------------------------------------------------------
  function render() {
    renderHeading();
    var choosing = phase === 'choosing';
    show(el.choose, choosing && !!sale);
    show(el.holdPanel, phase === 'holding' && !!claim);
    show(el.ticket, tickets.length > 0 && (phase === 'confirmed' || phase === 'choosing' || phase === 'holding' || phase === 'nopass'));
    show(el.back, phase === 'nopass');
    if (sale) {
      show(el.seatPicker, isSeatSale());
      show(el.stockPicker, !isSeatSale());
      renderStock();
      if (isSeatSale()) renderSeats(); else renderQuantity();
      renderHoldButton();
    }
    renderTickets();
    renderBusy();
  }

  function renderStock() {
    var left = stockLeft();
    setText(el.stockLeft, String(left));
    setText(el.stockLeftLabel, isSeatSale() ? (left === 1 ? 'seat left' : 'seats left') : 'left');
    el.stockLeft.setAttribute('data-empty', left === 0 ? 'true' : 'false');
    setText(el.chooseTitle, isSeatSale() ? 'Seats' : 'Quantity');
    var lim = limit();
    setText(el.limitNote, ' · up to ' + lim + ' per person');
  }

  function parseSeat(id) {
    var m = /^([A-Za-z]*)(\d+)$/.exec(id);
    if (!m) return { row: id, num: NaN };
    return { row: m[1].toUpperCase(), num: parseInt(m[2], 10) };
  }

  function compareRows(a, b) {
    if (a.length !== b.length) return a.length - b.length;
    return a < b ? -1 : (a > b ? 1 : 0);
  }

  function buildSeatMap(ids) {
    var rows = {};
    var order = [];
    var maxNum = 0;
    var maxInRow = 0;
    var aligned = true;
    ids.forEach(function (id) {
      var p = parseSeat(id);
      if (!isFinite(p.num)) aligned = false; else maxNum = Math.max(maxNum, p.num);
      if (!rows[p.row]) { rows[p.row] = []; order.push(p.row); }
      rows[p.row].push({ id: id, num: p.num });
    });
    order.sort(compareRows);
    order.forEach(function (r) {
      rows[r].sort(function (a, b) {
        if (isFinite(a.num) && isFinite(b.num) && a.num !== b.num) return a.num - b.num;
        return a.id < b.id ? -1 : (a.id > b.id ? 1 : 0);
      });
      maxInRow = Math.max(maxInRow, rows[r].length);
    });
    if (maxNum > MAX_ALIGNED_COLUMNS) aligned = false;
    var cols = aligned ? maxNum : maxInRow;

    el.seatMap.textContent = '';
    el.seatMap.style.setProperty('--seat-cols', String(Math.max(1, cols)));
    seatButtons = {};
    order.forEach(function (r) {
      var row = document.createElement('div');
      row.className = 'seat-row';
      row.setAttribute('role', 'group');
      row.setAttribute('aria-label', r ? 'Row ' + r : 'Seats');
      var label = document.createElement('span');
      label.className = 'seat-row-label';
      label.setAttribute('aria-hidden', 'true');
      label.textContent = r && r.length <= 3 ? r : '';
      row.appendChild(label);
      rows[r].forEach(function (s, i) {
        var b = document.createElement('button');
        b.type = 'button';
        b.className = 'seat';
        b.setAttribute('data-seat', s.id);
        b.setAttribute('aria-pressed', 'false');
        b.textContent = isFinite(s.num) && r.length <= 3 ? String(s.num) : s.id;
        b.style.gridColumn = String((aligned ? s.num : i + 1) + 1);
        row.appendChild(b);
        seatButtons[s.id] = b;
      });
      el.seatMap.appendChild(row);
    });
  }

  function mySeats() {
    var out = {};
    var note = function (c, how) {
      if (!c || !Array.isArray(c.seats)) return;
      c.seats.forEach(function (s) { out[s] = how; });
    };
    var mine = sale && Array.isArray(sale.mine) ? sale.mine : [];
    mine.forEach(function (c) {
      if (!c) return;
      if (c.state === 'confirmed') note(c, 'sold');
      else if (c.state === 'held' && !dropped[c.claim_id]) note(c, 'held');
    });
    if (claim) note(claim, 'held');
    tickets.forEach(function (t) { note(t, 'sold'); });
    return out;
  }

  function renderSeats() {
    var seats = sale.seats && typeof sale.seats === 'object' ? sale.seats : {};
    var ids = Object.keys(seats);
    var key = ids.slice().sort().join('\u0000');
    if (key !== seatLayoutKey) {
      seatLayoutKey = key;
      buildSeatMap(ids);
    }
    var mine = mySeats();
    show(legendMine, Object.keys(mine).length > 0);
    var chosen = {};
    selected.forEach(function (s) { chosen[s] = true; });
    ids.forEach(function (id) {
      var b = seatButtons[id];
      if (!b) return;
      var state = seats[id] === 'held' || seats[id] === 'sold' ? seats[id] : 'free';
      var pressed = state === 'free' && chosen[id] === true;
      if (b.getAttribute('data-state') !== state) b.setAttribute('data-state', state);
      if (mine[id]) b.setAttribute('data-mine', mine[id]); else b.removeAttribute('data-mine');
      b.setAttribute('aria-pressed', pressed ? 'true' : 'false');
      var off = state !== 'free';
      if (b.disabled !== off) b.disabled = off;
      var what = state === 'free' ? (pressed ? 'chosen' : 'free')
        : mine[id] ? (mine[id] === 'sold' ? 'yours' : 'held for you')
        : state === 'held' ? 'held by someone else' : 'sold';
      b.setAttribute('aria-label', 'Seat ' + id + ', ' + what);
      b.title = 'Seat ' + id + ' · ' + what;
    });
    var picked = selected.slice();
    setText(el.selection, picked.length
      ? 'Chosen: ' + listing(picked) + ' (' + picked.length + ' of up to ' + Math.max(picked.length, canPick()) + ')'
      : 'No seats chosen yet.');
  }

  function renderQuantity() {
    var max = Math.min(canPick(), stockLeft());
    var sel = el.quantity;
    var was = parseInt(sel.value, 10);
    if (sel.options.length !== max) {
      sel.textContent = '';
      for (var i = 1; i <= max; i++) {
        var o = document.createElement('option');
        o.value = String(i);
        o.textContent = String(i);
        sel.appendChild(o);
      }
      if (max > 0) sel.value = String(isFinite(was) ? Math.min(Math.max(1, was), max) : 1);
    }
    sel.disabled = max === 0;
    show(el.stockPicker, max > 0);
  }

  function renderHoldButton() {
    var n = isSeatSale() ? selected.length : (parseInt(el.quantity.value, 10) || 0);
    var label = 'Hold';
    if (isSeatSale() && n > 0) label = 'Hold ' + plural(n, 'seat', 'seats');
    else if (!isSeatSale() && n > 0) label = 'Hold ' + n;
    setText(el.hold, label);
    var ttl = sale && isCount(sale.hold_ttl_s) ? sale.hold_ttl_s : 0;
    if (ttl) {
      setText(el.holdHint, 'We keep it for you for ' + formatTtl(ttl) + ' while you confirm.');
    }
  }

  function formatTtl(s) {
    if (s < 60) return plural(s, 'second', 'seconds');
    var m = Math.floor(s / 60);
    var rest = s % 60;
    return plural(m, 'minute', 'minutes') + (rest ? ' ' + plural(rest, 'second', 'seconds') : '');
  }

  function renderBusy() {
    var n = isSeatSale() ? selected.length : (parseInt(el.quantity.value, 10) || 0);
    el.hold.disabled = busy || !sale || n === 0;
    el.hold.setAttribute('aria-busy', busy && phase === 'choosing' ? 'true' : 'false');
    el.confirm.disabled = busy;
    el.release.disabled = busy;
    el.buyMore.disabled = busy;
  }

  function renderTickets() {
    if (!tickets.length) return;
    var last = tickets[tickets.length - 1];
    setText(el.ticketSequence, String(last.sequence));
    setText(el.ticketWhat, describe(last));
    var when = last.confirmed_at ? new Date(last.confirmed_at) : null;
    setText(el.ticketWhen, when && isFinite(when.getTime())
      ? 'Confirmed at ' + when.toLocaleTimeString() + '. Show this number when asked.'
      : 'Show this number when asked.');
    var others = tickets.slice(0, -1);
    show(el.otherTickets, others.length > 0);
    var text = others.map(function (t) { return 'Ticket #' + t.sequence + ' · ' + describe(t); }).join('\n');
    if (el.otherTickets.getAttribute('data-text') !== text) {
      el.otherTickets.setAttribute('data-text', text);
      el.otherTickets.textContent = '';
      others.forEach(function (t) {
        var li = document.createElement('li');
        li.textContent = 'Also yours: Ticket #' + t.sequence + ' · ' + describe(t);
        el.otherTickets.appendChild(li);
      });
    }
    show(el.buyMore, phase === 'confirmed' && sale && canPick() > 0 && stockLeft() > 0);
  }

  // --- countdown ------------------------------------------------------------------
  function startCountdown() {
    stopCountdown();
    warnedMinute = false;
    expiryChecked = false;
    var ends = Date.parse(claim.hold_expires_at || '');
    var ttl = sale && isCount(sale.hold_ttl_s) ? sale.hold_ttl_s * 1000 : 0;
    if (!isFinite(ends)) {
      deadline = Date.now() + (ttl || 0);
    } else {
      deadline = ends - offsetMs;
      // A clock we could not place: never show more time than a hold lasts.
      if (ttl && deadline - Date.now() > ttl + 2000) deadline = Date.now() + ttl;
    }
    tick();
    countdownTimer = setInterval(tick, 250);
  }

  function stopCountdown() {
    if (countdownTimer) { clearInterval(countdownTimer); countdownTimer = null; }
  }

  function tick() {
    var left = Math.max(0, deadline - Date.now());
    var s = Math.ceil(left / 1000);
    var mm = Math.floor(s / 60);
    var ss = s % 60;
    setText(el.countdown, (mm < 10 ? '0' : '') + mm + ':' + (ss < 10 ? '0' : '') + ss);
    el.countdown.setAttribute('data-urgent', s <= URGENT_S ? 'true' : 'false');
    if (s <= 60 && s > 50 && !warnedMinute && !busy) {
      warnedMinute = true;
      setMessage('Less than a minute left: confirm now to keep it.', 'warn');
    }
    if (left === 0 && !expiryChecked) {
      // The server decides; ask it now rather than in two seconds.
      expiryChecked = true;
      refreshSoon(0);
    }
  }

  // --- what the server says ------------------------------------------------------
  function applySale(view) {
    sale = view;
    var mine = Array.isArray(view.mine) ? view.mine : [];
    mine.forEach(function (c) { if (c && c.state === 'confirmed') addTicket(c); });
    var held = mine.filter(function (c) {
      return c && c.state === 'held' && typeof c.claim_id === 'string' && !dropped[c.claim_id];
    });

    // Chosen seats someone else just took.
    if (isSeatSale() && selected.length) {
      var seats = view.seats || {};
      var gone = selected.filter(function (s) { return seats[s] !== 'free'; });
      if (gone.length) {
        selected = selected.filter(function (s) { return seats[s] === 'free'; });
        if (phase === 'choosing') {
          setMessage((gone.length === 1 ? 'Seat ' + gone[0] + ' was' : 'Seats ' + listing(gone) + ' were') +
            ' just taken by someone else. Choose another.', 'warn');
        }
      }
    }

    if (phase === 'holding' && claim) {
      var still = null;
      for (var i = 0; i < mine.length; i++) if (mine[i] && mine[i].claim_id === claim.claim_id) still = mine[i];
      if (still && still.state === 'confirmed') { onConfirmed(still); return; }
      if (!still) {
        if (tickets.some(function (t) { return t.claim_id === claim.claim_id; })) { onConfirmed(claim); return; }
        holdLost('Your hold ran out before you confirmed, so it went back on sale. You can choose again.');
        return;
      }
      render();
      return;
    }
    if ((phase === 'loading' || phase === 'choosing' || phase === 'confirmed') && held.length && !busy) {
      // A hold from before a reload (or another tab): carry on with it.
      held.sort(function (a, b) { return (b.sequence || 0) - (a.sequence || 0); });
      startHolding(held[0]);
      return;
    }
    if (phase === 'loading' || phase === 'nosale') {
      if (tickets.length) { setPhase('confirmed'); setMessage('Your purchase is confirmed.', 'ok'); }
      else { setPhase('choosing'); showDefaultMessage(); }
      return;
    }
    render();
    if (phase === 'choosing' && !noticeShown) showDefaultMessage();
  }

  function noSale() {
    sale = null;
    claim = null;
    stopCountdown();
    setPhase('nosale');
    setMessage('There is no sale in this room at the moment. This page checks again every few seconds.', 'warn');
  }

  function noPass(code) {
    stopCountdown();
    claim = null;
    setPhase('nopass');
    var why = code === 'pass_expired' ? 'Your pass has expired' : 'Your pass is missing or expired';
    setMessage(why + ': go back to the waiting room to get a new one.', 'error');
    if (el.back) el.back.hidden = false;
  }

  function startHolding(c) {
    claim = c;
    selected = [];
    setText(el.heldWhat, describe(c));
    setPhase('holding');
    startCountdown();
    setMessage('Held for you: confirm before the time runs out, or release it for someone else.', 'ok');
    if (el.confirm && document.activeElement === el.hold) el.confirm.focus();
  }

  function holdLost(text) {
    if (claim) dropped[claim.claim_id] = true;
    claim = null;
    stopCountdown();
    setPhase('choosing');
    setMessage(text, 'error');
    refreshSoon(0);
  }

  function onConfirmed(c) {
    addTicket(c);
    dropped[c.claim_id] = true; // no longer a hold to resume
    claim = null;
    stopCountdown();
    setPhase('confirmed');
    setMessage('Your purchase is confirmed. Ticket #' + c.sequence + ' is yours.', 'ok');
    if (el.ticket) {
      el.ticket.setAttribute('tabindex', '-1');
      try { el.ticket.focus({ preventScroll: false }); } catch (e) { el.ticket.focus(); }
    }
  }

  // --- actions ----------------------------------------------------------------------
  function begin() {
    busy = true;
    epoch++;
    renderBusy();
  }

  function end() {
    busy = false;
    epoch++;
    renderBusy();
    refreshSoon(300);
  }

  function unreachable(what) {
    setMessage('We could not reach the sale to ' + what + '. Check your connection and try again.', 'error');
  }

  function hold() {
    if (busy || !sale || phase !== 'choosing') return;
    var payload;
    var what;
    if (isSeatSale()) {
      if (!selected.length) { setMessage('Choose at least one seat first.', 'warn'); return; }
      payload = { seats: selected.slice() };
      what = 'seats:' + selected.slice().sort().join(',');
    } else {
      var q = parseInt(el.quantity.value, 10);
      if (!(q > 0)) { setMessage('Choose how many first.', 'warn'); return; }
      payload = { quantity: q };
      what = 'quantity:' + q;
    }
    // A new key for each new choice; the same one again if the last try for
    // this very choice got no answer (it may have gone through).
    if (!pendingKey || pendingFor !== what) { pendingKey = newKey(); pendingFor = what; }
    var key = pendingKey;
    begin();
    setMessage('Holding…', 'working');
    api('POST', base + '/claims', payload, { 'Idempotency-Key': key }).then(function (res) {
      pendingKey = null;
      if (res.ok && res.body && typeof res.body.claim_id === 'string') {
        learnServerTime(res.body, res);
        if (offsetSource !== 'server' && sale && isCount(sale.hold_ttl_s)) {
          // A fresh hold started about now on the server's clock.
          var ends = Date.parse(res.body.hold_expires_at || '');
          if (isFinite(ends)) {
            offsetMs = ends - sale.hold_ttl_s * 1000 - (res.sent + res.got) / 2;
            offsetSource = 'claim';
          }
        }
        if (res.body.state === 'confirmed') onConfirmed(res.body); else startHolding(res.body);
        return;
      }
      claimFailed(res);
    }, function () {
      unreachable('hold it');
    }).then(end, end);
  }

  function claimFailed(res) {
    var code = errorCode(res);
    if (res.status === 401) { noPass(code); return; }
    if (res.status === 404 && code !== 'room_not_found') { noSale(); return; }
    if (code === 'sold_out') {
      setMessage(isSeatSale()
        ? 'Sold out: there are no seats left to hold. Holds that run out come back on sale, so keep this page open.'
        : 'Not enough left to hold that many. The count is up to date again: choose again, or keep this page open, as holds that run out come back on sale.', 'error');
    } else if (code === 'seat_taken') {
      setMessage('Someone else was quicker for one of those seats. The map is up to date again: choose again.', 'error');
    } else if (code === 'limit_reached') {
      setMessage('That would take you over the limit of ' + limit() + ' per person.', 'error');
    } else if (res.status === 429) {
      setMessage('Lots of people are trying right now. Wait a moment, then press Hold again.', 'warn');
    } else if (res.status === 400) {
      setMessage('That choice was not accepted' + (errorText(res) ? ': ' + errorText(res) : '.'), 'error');
    } else {
      setMessage('Something went wrong (' + res.status + '). Please try again.', 'error');
    }
    refreshSoon(0);
  }

  function confirmHold() {
    if (busy || !claim) return;
    var c = claim;
    begin();
    setMessage('Confirming…', 'working');
    api('POST', base + '/claims/' + encodeURIComponent(c.claim_id) + '/confirm').then(function (res) {
      var code = errorCode(res);
      if (res.ok && res.body && typeof res.body.claim_id === 'string') { onConfirmed(res.body); return; }
      if (res.status === 401) { noPass(code); return; }
      if (res.status === 410 || code === 'hold_expired') {
        holdLost('Your hold ran out before you confirmed, so it went back on sale. You can choose again.');
        return;
      }
      if (code === 'claim_released') {
        holdLost('This hold was released, so it went back on sale. You can choose again.');
        return;
      }
      if (res.status === 404) {
        holdLost('This hold is no longer there. You can choose again.');
        return;
      }
      setMessage('Your purchase could not be confirmed (' + res.status + '). Please press Confirm again.', 'error');
    }, function () {
      unreachable('confirm');
    }).then(end, end);
  }

  function releaseHold() {
    if (busy || !claim) return;
    var c = claim;
    begin();
    setMessage('Releasing…', 'working');
    api('DELETE', base + '/claims/' + encodeURIComponent(c.claim_id)).then(function (res) {
      if (res.status === 401) { noPass(errorCode(res)); return; }
      if (res.ok || res.status === 404 || res.status === 410) {
        dropped[c.claim_id] = true;
        claim = null;
        stopCountdown();
        setPhase('choosing');
        setMessage('Released: it is back on sale for everyone. You can choose again.', 'info');
        if (el.hold) el.hold.focus();
        return;
      }
      if (errorCode(res) === 'claim_confirmed' || res.status === 409) {
        setMessage('This hold can no longer be released.', 'warn');
        return;
      }
      setMessage('It could not be released (' + res.status + '). Please try again.', 'error');
    }, function () {
      unreachable('release it');
    }).then(end, end);
  }

  function toggleSeat(id) {
    if (phase !== 'choosing' || busy || !sale) return;
    var seats = sale.seats || {};
    if (seats[id] !== 'free') return;
    var at = selected.indexOf(id);
    if (at >= 0) {
      selected.splice(at, 1);
    } else {
      var may = canPick();
      if (selected.length >= may) {
        setMessage(may === 0
          ? 'You have reached the limit of ' + limit() + ' per person.'
          : 'You can choose up to ' + plural(may, 'seat', 'seats') + '. Tap a chosen seat to unpick it.', 'warn');
        return;
      }
      selected.push(id);
    }
    pendingKey = null;
    render();
    showDefaultMessage();
  }

  // --- refreshing ---------------------------------------------------------------------
  function refreshSoon(ms) {
    if (refreshTimer) clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, ms);
  }

  function scheduleRefresh() {
    var ms = document.visibilityState === 'hidden' && phase !== 'holding' ? HIDDEN_REFRESH_MS : REFRESH_MS;
    if (failures) ms = Math.min(MAX_BACKOFF_MS, REFRESH_MS * Math.pow(2, Math.min(failures, 4)));
    refreshSoon(ms);
  }

  function refresh() {
    refreshTimer = null;
    if (refreshing) { scheduleRefresh(); return; }
    refreshing = true;
    var asked = epoch;
    api('GET', base).then(function (res) {
      refreshing = false;
      failures = 0;
      if (offlineShown) { offlineShown = false; if (phase === 'choosing') showDefaultMessage(); }
      if (asked !== epoch || busy) return; // something changed meanwhile: the next one tells
      if (res.status === 404) { noSale(); return; }
      if (res.status === 401) { noPass(errorCode(res)); return; }
      if (!res.ok || !res.body || typeof res.body !== 'object') return;
      learnServerTime(res.body, res);
      applySale(res.body);
    }, function () {
      refreshing = false;
      failures++;
      if (failures >= 3 && !offlineShown && (phase === 'choosing' || phase === 'loading')) {
        offlineShown = true;
        setMessage('We cannot reach the sale right now; retrying…', 'warn');
      }
    }).then(function () {
      if (phase !== 'nopass') scheduleRefresh();
    });
  }

  // --- wiring -------------------------------------------------------------------------
  if (el.seatMap) {
    el.seatMap.addEventListener('click', function (ev) {
      var t = ev.target;
      while (t && t !== el.seatMap && !(t.getAttribute && t.getAttribute('data-seat'))) t = t.parentNode;
      if (t && t !== el.seatMap) toggleSeat(t.getAttribute('data-seat'));
    });
  }
  if (el.quantity) {
    el.quantity.addEventListener('change', function () { pendingKey = null; render(); showDefaultMessage(); });
  }
  if (el.hold) el.hold.addEventListener('click', hold);
  if (el.confirm) el.confirm.addEventListener('click', confirmHold);
  if (el.release) el.release.addEventListener('click', releaseHold);
  if (el.buyMore) {
    el.buyMore.addEventListener('click', function () {
      setPhase('choosing');
      showDefaultMessage();
      refreshSoon(0);
    });
  }
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && phase !== 'nopass') refreshSoon(0);
  });

  if (!room) return;
  refresh();
})();
