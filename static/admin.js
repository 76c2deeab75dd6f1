// Operator page: refreshes the live figures every second from
// /api/admin/rooms (the session cookie authenticates it), keeps the edit forms
// in step with config changed elsewhere without touching a field the
// operator is editing, follows each room's sale (stock left, holds, orders),
// and asks before closing a room or replacing a sale.
(function () {
  'use strict';

  var REFRESH_MS = 1000;
  var MAX_BACKOFF_MS = 15000;
  var STATS = ['waiting', 'active', 'admitted_total', 'admitted_last_minute', 'oldest_wait_seconds'];
  var CONFIG = ['admit_per_tick', 'tick_ms', 'max_active', 'pass_ttl_s', 'abandon_after_s', 'paused'];

  var live = document.getElementById('live-status');
  var failures = 0;
  var stopped = false;

  function setLive(state, text) {
    if (!live) return;
    live.setAttribute('data-state', state);
    if (live.textContent !== text) live.textContent = text;
  }

  function cells(roomId, stat) {
    var all = document.querySelectorAll('[data-stat="' + stat + '"]');
    var out = [];
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute('data-room') === roomId) out.push(all[i]);
    }
    return out;
  }

  function formatSeconds(s) {
    if (s < 60) return s + ' s';
    var m = Math.floor(s / 60);
    var rest = s % 60;
    if (m < 60) return m + ' min ' + (rest < 10 ? '0' : '') + rest + ' s';
    var h = Math.floor(m / 60);
    return h + ' h ' + (m % 60) + ' min';
  }

  function isCount(v) {
    return typeof v === 'number' && isFinite(v) && v >= 0;
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
    var label = closed ? 'closed' : (paused ? 'paused' : 'running');
    var badge = node.querySelector('.badge');
    if (!badge) {
      badge = document.createElement('span');
      node.textContent = '';
      node.appendChild(badge);
    }
    badge.className = 'badge badge-' + label;
    if (badge.textContent !== label) badge.textContent = label;
    node.setAttribute('data-value', String(!!paused));
  }

  // A field counts as being edited while it has focus or while its value
  // differs from the value the page last got from the server.
  function editing(input) {
    if (input === document.activeElement) return true;
    if (input.tagName === 'SELECT') {
      for (var i = 0; i < input.options.length; i++) {
        var o = input.options[i];
        if (o.selected !== o.defaultSelected) return true;
      }
      return false;
    }
    return input.value !== input.defaultValue;
  }

  function syncField(form, name, value) {
    var input = form.elements.namedItem(name);
    if (!input || !input.tagName || editing(input)) return; // no tagName: several fields share the name
    var text = value === null || value === undefined ? '' : String(value);
    if (input.tagName === 'SELECT') {
      for (var i = 0; i < input.options.length; i++) {
        var o = input.options[i];
        var sel = o.value === text;
        o.defaultSelected = sel;
        o.selected = sel;
      }
    } else if (input.value !== text) {
      input.defaultValue = text;
      input.value = text;
    }
  }

  function apply(data) {
    var rooms = data && Array.isArray(data.rooms) ? data.rooms : [];
    var seen = {};
    var unknown = 0;
    for (var i = 0; i < rooms.length; i++) {
      var r = rooms[i];
      if (!r || typeof r.id !== 'string') continue;
      seen[r.id] = true;
      var row = document.getElementById('row-' + r.id);
      if (!row) { unknown++; continue; }
      row.classList.toggle('is-closed', r.closed === true);
      var st = r.stats && typeof r.stats === 'object' ? r.stats : {};
      for (var j = 0; j < STATS.length; j++) {
        var name = STATS[j];
        var v = st[name];
        if (!isCount(v)) continue;
        var text = name === 'oldest_wait_seconds' ? formatSeconds(Math.floor(v)) : String(v);
        cells(r.id, name).forEach(function (c) { setCell(c, text, v); });
      }
      if (typeof r.paused === 'boolean') {
        cells(r.id, 'paused').forEach(function (c) { setPausedCell(c, r.paused, r.closed === true); });
      }
      if (typeof r.name === 'string') {
        cells(r.id, 'name').forEach(function (c) { if (c.textContent !== r.name) c.textContent = r.name; });
      }
      var form = document.getElementById('edit-' + r.id);
      if (form) {
        for (var k = 0; k < CONFIG.length; k++) {
          if (Object.prototype.hasOwnProperty.call(r, CONFIG[k])) syncField(form, CONFIG[k], r[CONFIG[k]]);
        }
      }
    }
    var gone = 0;
    var rows = document.querySelectorAll('tr[data-room]');
    for (var n = 0; n < rows.length; n++) {
      var id = rows[n].getAttribute('data-room');
      var missing = !seen[id];
      rows[n].classList.toggle('is-gone', missing);
      if (missing) gone++;
    }
    var now = new Date();
    var time = now.toLocaleTimeString();
    if (unknown || gone) {
      setLive('changed', 'Live · updated ' + time + ' · the list of rooms changed, reload to see it.');
    } else {
      setLive('live', 'Live · updated ' + time);
    }
  }

  function schedule(ms) {
    if (!stopped) setTimeout(refresh, ms);
  }

  function refresh() {
    fetch('/api/admin/rooms', {
      credentials: 'same-origin',
      headers: { 'Accept': 'application/json' },
      cache: 'no-store'
    }).then(function (res) {
      if (res.status === 401) {
        stopped = true;
        setLive('expired', '');
        if (live) {
          live.textContent = 'Your session expired. ';
          var a = document.createElement('a');
          a.href = '/admin';
          a.textContent = 'Log in again';
          live.appendChild(a);
          live.appendChild(document.createTextNode('.'));
        }
        return null;
      }
      if (!res.ok) throw new Error('HTTP ' + res.status);
      return res.json();
    }).then(function (data) {
      if (data === null) return;
      failures = 0;
      try { apply(data); } catch (e) { /* never let one odd answer stop the updates */ }
      schedule(REFRESH_MS);
    }).catch(function () {
      failures++;
      setLive('error', 'Live figures unavailable, retrying…');
      schedule(Math.min(MAX_BACKOFF_MS, REFRESH_MS * Math.pow(2, Math.min(failures, 4))));
    });
  }

  // --- sales behind the gate ---------------------------------------------------
  // Each room's sale figures, once a second: what is left and held from the
  // public sale view, the orders from the operator API.
  var saleSections = document.querySelectorAll('.sale-admin[data-room]');
  var saleFailures = 0;
  var saleStopped = false;
  // Rooms without a sale are asked again only every few seconds.
  var NO_SALE_RECHECK_MS = 5000;
  var noSaleUntil = {};

  function saleCells(roomId, stat) {
    var all = document.querySelectorAll('[data-sale-stat="' + stat + '"]');
    var out = [];
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute('data-room') === roomId) out.push(all[i]);
    }
    return out;
  }

  function setSaleStat(roomId, stat, text, value) {
    saleCells(roomId, stat).forEach(function (c) { setCell(c, text, value); });
  }

  function setSaleKind(roomId, kind) {
    var lists = document.querySelectorAll('.sale-stats[data-room]');
    for (var i = 0; i < lists.length; i++) {
      if (lists[i].getAttribute('data-room') === roomId) lists[i].setAttribute('data-sale', kind);
    }
  }

  function getJson(url) {
    return fetch(url, {
      credentials: 'same-origin',
      headers: { 'Accept': 'application/json' },
      cache: 'no-store'
    }).then(function (res) {
      if (res.status === 404 || res.status === 401) return { status: res.status, body: null };
      if (!res.ok) throw new Error('HTTP ' + res.status);
      return res.json().then(function (body) { return { status: res.status, body: body }; });
    });
  }

  function applySale(roomId, view) {
    var kind = view && view.kind === 'seats' ? 'seats' : 'stock';
    setSaleKind(roomId, kind);
    if (isCount(view.stock_left)) setSaleStat(roomId, 'stock_left', String(view.stock_left), view.stock_left);
    if (kind === 'seats') {
      var held = 0;
      var seats = view.seats && typeof view.seats === 'object' ? view.seats : {};
      for (var k in seats) if (Object.prototype.hasOwnProperty.call(seats, k) && seats[k] === 'held') held++;
      setSaleStat(roomId, 'held', String(held), held);
    } else {
      // A stock sale lists no claims: its holds cannot be counted from here.
      setSaleStat(roomId, 'held', '–', '');
    }
    var form = document.getElementById('sale-' + roomId);
    if (form) {
      form.setAttribute('data-sale', kind);
      if (isCount(view.per_user_limit)) syncField(form, 'per_user_limit', view.per_user_limit);
      if (isCount(view.hold_ttl_s)) syncField(form, 'hold_ttl_s', view.hold_ttl_s);
    }
  }

  function noSale(roomId) {
    setSaleKind(roomId, 'none');
    setSaleStat(roomId, 'stock_left', 'no sale', '');
    setSaleStat(roomId, 'held', '–', '');
    setSaleStat(roomId, 'orders', '–', '');
    var form = document.getElementById('sale-' + roomId);
    if (form) form.setAttribute('data-sale', 'none');
  }

  function refreshSale(roomId) {
    if (noSaleUntil[roomId] && Date.now() < noSaleUntil[roomId]) return Promise.resolve();
    var enc = encodeURIComponent(roomId);
    return getJson('/api/rooms/' + enc + '/sale').then(function (res) {
      if (res.status === 404 || !res.body) {
        noSale(roomId);
        noSaleUntil[roomId] = Date.now() + NO_SALE_RECHECK_MS;
        return null;
      }
      delete noSaleUntil[roomId];
      applySale(roomId, res.body);
      return getJson('/api/admin/rooms/' + enc + '/sale/orders');
    }).then(function (res) {
      if (!res) return;
      if (res.status === 401) { saleStopped = true; return; }
      if (res.status === 404 || !res.body) { setSaleStat(roomId, 'orders', '–', ''); return; }
      var n = Array.isArray(res.body.orders) ? res.body.orders.length : null;
      if (n !== null) setSaleStat(roomId, 'orders', String(n), n);
    });
  }

  function refreshSales() {
    if (saleStopped || stopped) return;
    var jobs = [];
    for (var i = 0; i < saleSections.length; i++) {
      var id = saleSections[i].getAttribute('data-room');
      if (id) jobs.push(refreshSale(id));
    }
    Promise.all(jobs).then(function () {
      saleFailures = 0;
      setTimeout(refreshSales, REFRESH_MS);
    }, function () {
      saleFailures++;
      setTimeout(refreshSales, Math.min(MAX_BACKOFF_MS, REFRESH_MS * Math.pow(2, Math.min(saleFailures, 4))));
    });
  }

  // A sale needs a stock count or seats, not both; and setting up a sale
  // again replaces the old one, holds and orders included.
  var saleForms = document.querySelectorAll('form.sale-form');
  for (var s = 0; s < saleForms.length; s++) {
    (function (form) {
      var stock = form.elements.namedItem('stock');
      var seats = form.elements.namedItem('seats');
      function check() {
        var hasStock = stock.value.trim() !== '';
        var hasSeats = seats.value.trim() !== '';
        var msg = hasStock && hasSeats ? 'Give a stock count or seats, not both.'
          : (!hasStock && !hasSeats ? 'Give a stock count or a list of seats.' : '');
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
        var kind = form.getAttribute('data-sale');
        if (kind === 'seats' || kind === 'stock') {
          var id = form.getAttribute('data-room') || 'this room';
          if (!window.confirm('Replace the sale in room "' + id + '"? Its holds and orders are dropped.')) {
            ev.preventDefault();
          }
        }
      });
    })(saleForms[s]);
  }

  // Ask before closing a room.
  var closeForms = document.querySelectorAll('form.close-form');
  for (var i = 0; i < closeForms.length; i++) {
    closeForms[i].addEventListener('submit', function (ev) {
      var id = this.getAttribute('data-room') || 'this room';
      if (!window.confirm('Close room "' + id + '"? Everyone waiting is told it has closed. This cannot be undone.')) {
        ev.preventDefault();
      }
    });
  }

  // Don't send a double submit.
  var forms = document.querySelectorAll('form');
  for (var f = 0; f < forms.length; f++) {
    forms[f].addEventListener('submit', function (ev) {
      if (ev.defaultPrevented) return;
      if (this.getAttribute('data-sent') === '1') { ev.preventDefault(); return; }
      this.setAttribute('data-sent', '1');
    });
  }

  window.addEventListener('pageshow', function () {
    for (var g = 0; g < forms.length; g++) forms[g].removeAttribute('data-sent');
  });

  if (document.getElementById('rooms-table') || document.getElementById('no-rooms')) refresh();
  if (saleSections.length) refreshSales();
})();
