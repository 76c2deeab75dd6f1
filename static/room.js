// Waiting-room page: joins the line, follows the visitor's place over a
// WebSocket (polling while it is down) and sends the visitor on when admitted.
// No framework; runs in any browser from the last few years.
(function () {
  'use strict';

  var PING_MS = 20000;
  var POLL_MS = 5000;
  var BACKOFF_BASE_MS = 1000;
  var BACKOFF_MAX_MS = 30000;
  var REDIRECT_DELAY_MS = 1500;
  var ANNOUNCE_MIN_GAP_MS = 10000;

  var body = document.body;
  var room = body.getAttribute('data-room') || '';
  var lang = document.documentElement.getAttribute('lang') || 'en';
  var base = '/api/rooms/' + encodeURIComponent(room);

  var T = {};
  try {
    var textsEl = document.getElementById('wr-texts');
    var parsed = textsEl ? JSON.parse(textsEl.textContent || '{}') : {};
    if (parsed && typeof parsed === 'object') T = parsed;
  } catch (e) { /* keep defaults */ }

  function t(key, fallback) {
    var v = T[key];
    return typeof v === 'string' ? v : (fallback || '');
  }
  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (m, k) {
      return Object.prototype.hasOwnProperty.call(values, k) ? String(values[k]) : m;
    });
  }
  function $(id) { return document.getElementById(id); }

  var el = {
    heading: $('heading'),
    position: $('position'),
    waiting: $('waiting'),
    eta: $('eta'),
    progress: $('progress'),
    fill: $('progress-fill'),
    connection: $('connection'),
    message: $('message'),
    announce: $('announce'),
    joinAgain: $('join-again'),
    cont: $('continue')
  };

  // --- state ----------------------------------------------------------------
  var ticket = null;
  var ws = null;
  var wsAttempt = 0;
  var wsTimer = null;
  var pingTimer = null;
  var pollTimer = null;
  var joinTimer = null;
  var joinAttempt = 0;
  var joining = false;
  var done = false;          // terminal state reached: no more reconnecting
  var firstPosition = null;  // first position seen, for the progress bar
  var lastAnnounced = '';
  var lastAnnounceAt = 0;
  var announceTimer = null;
  var pendingAnnounce = null;

  // --- small view helpers ---------------------------------------------------
  function setText(node, text) {
    if (node && node.textContent !== text) node.textContent = text;
  }

  function setConnection(state) {
    if (!el.connection) return;
    var key = {
      connecting: 'conn_connecting', live: 'conn_live', reconnecting: 'conn_reconnecting',
      polling: 'conn_polling', offline: 'conn_offline', done: null
    }[state];
    el.connection.setAttribute('data-state', state);
    if (key) setText(el.connection, t(key, state));
    el.connection.hidden = state === 'done';
  }

  // The page's overall state, for the stylesheet (it hides the line's
  // figures once they no longer mean anything) and the heading.
  function setPageState(state) {
    body.setAttribute('data-state', state);
    var key = { admitted: 'heading_admitted', closed: 'heading_closed', lost: 'heading_lost' }[state] || 'heading';
    setText(el.heading, t(key, el.heading ? el.heading.textContent : ''));
  }

  function setMessage(key, state, fallback) {
    if (!el.message) return;
    el.message.setAttribute('data-state', state);
    setText(el.message, t(key, fallback));
  }

  function setProgress(pct) {
    pct = Math.max(0, Math.min(100, Math.round(pct)));
    if (el.progress) {
      el.progress.setAttribute('aria-valuenow', String(pct));
      el.progress.setAttribute('aria-valuetext', pct + '%');
    }
    if (el.fill) el.fill.style.width = pct + '%';
  }

  function say(text, urgent) {
    if (!el.announce || !text) return;
    if (announceTimer) { clearTimeout(announceTimer); announceTimer = null; }
    var now = Date.now();
    if (urgent || now - lastAnnounceAt >= ANNOUNCE_MIN_GAP_MS) {
      if (text !== lastAnnounced) {
        lastAnnounced = text;
        lastAnnounceAt = now;
        el.announce.textContent = text;
      }
      pendingAnnounce = null;
      return;
    }
    // Too soon after the last one: say the latest text once the gap is over.
    pendingAnnounce = text;
    announceTimer = setTimeout(function () {
      announceTimer = null;
      if (pendingAnnounce) say(pendingAnnounce, true);
    }, ANNOUNCE_MIN_GAP_MS - (now - lastAnnounceAt));
  }

  function isCount(v) {
    return typeof v === 'number' && isFinite(v) && v >= 0 && Math.floor(v) === v;
  }

  function formatCount(n) {
    try { return n.toLocaleString(lang); } catch (e) { return String(n); }
  }

  function formatEta(seconds, paused) {
    if (!isCount(seconds)) return paused ? t('eta_paused', 'Paused') : t('eta_calculating', 'Calculating…');
    if (seconds < 60) return t('eta_under_minute', 'Under a minute');
    var minutes = Math.ceil(seconds / 60);
    if (minutes < 60) return fill(t('eta_minutes', 'About {n} min'), { n: minutes });
    var h = Math.floor(minutes / 60);
    var m = minutes % 60;
    return fill(t('eta_hours', 'About {h} h {m} min'), { h: h, m: m });
  }

  function showJoinAgain(show) {
    if (el.joinAgain) el.joinAgain.hidden = !show;
  }

  function backoff(attempt) {
    var d = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * Math.pow(2, Math.min(attempt, 16)));
    // +-20% jitter so that a crowd dropped at once does not come back at once.
    return Math.min(BACKOFF_MAX_MS, Math.round(d * (0.8 + Math.random() * 0.4)));
  }

  function safeRedirect(url) {
    if (typeof url !== 'string' || !url) return null;
    try {
      var u = new URL(url, location.href);
      return (u.protocol === 'http:' || u.protocol === 'https:') ? u.href : null;
    } catch (e) { return null; }
  }

  // --- status handling ------------------------------------------------------
  function handleStatus(s) {
    if (!s || typeof s !== 'object' || Array.isArray(s)) return;
    if (typeof s.ticket === 'string' && s.ticket) ticket = s.ticket;
    switch (s.state) {
      case 'waiting': onWaiting(s); break;
      case 'admitted': onAdmitted(s); break;
      case 'closed': onFinished('msg_closed', 'closed', 'This waiting room is closed.', false); break;
      case 'expired': onFinished('msg_expired', 'expired', 'Your place in line has expired.', true); break;
      case 'left': onFinished('msg_left', 'left', 'You left the line.', true); break;
      default: break; // unknown state: ignore
    }
  }

  function onWaiting(s) {
    if (done) return;
    showJoinAgain(false);
    setPageState('waiting');
    var paused = s.paused === true;
    if (isCount(s.position)) {
      var pos = s.position;
      if (firstPosition === null || pos > firstPosition) firstPosition = pos;
      setText(el.position, String(pos));
      setProgress(firstPosition > 0 ? (firstPosition - pos) * 100 / firstPosition : 0);
      say(fill(t('announce_position', 'Your position in line is now {n}.'), { n: pos }), false);
    }
    if (isCount(s.waiting)) setText(el.waiting, formatCount(s.waiting));
    setText(el.eta, formatEta(s.eta_seconds, paused));
    if (paused) setMessage('msg_paused', 'paused', 'Entry is paused for a moment.');
    else setMessage('msg_waiting', 'waiting', 'You have a place in line.');
  }

  function onAdmitted(s) {
    if (done) return;
    done = true;
    stopAll();
    setPageState('admitted');
    setConnection('done');
    setProgress(100);
    setText(el.position, '✓');
    setText(el.eta, '–');
    showJoinAgain(false);
    var url = safeRedirect(s.redirect_url);
    if (url) {
      setMessage('msg_admitted', 'admitted', "It's your turn!");
      say(t('msg_admitted', "It's your turn!"), true);
      if (el.cont) { el.cont.href = url; el.cont.hidden = false; }
      // Send the visitor on once per pass: coming back to this page (the back
      // button) shows the link instead of bouncing them forward again.
      var key = 'wr-sent:' + room + ':' + url;
      var sent = false;
      try { sent = sessionStorage.getItem(key) === '1'; sessionStorage.setItem(key, '1'); } catch (e) { /* storage off */ }
      if (!sent) setTimeout(function () { location.assign(url); }, REDIRECT_DELAY_MS);
    } else {
      setMessage('msg_admitted_no_link', 'admitted', "It's your turn!");
      say(t('msg_admitted_no_link', "It's your turn!"), true);
    }
  }

  function onFinished(key, state, fallback, canRejoin) {
    done = true;
    stopAll();
    setPageState(state === 'closed' ? 'closed' : 'lost');
    setConnection('done');
    setText(el.eta, '–');
    setMessage(key, state, fallback);
    say(t(key, fallback), true);
    showJoinAgain(canRejoin);
  }

  function stopAll() {
    clearTimeout(wsTimer); wsTimer = null;
    clearTimeout(joinTimer); joinTimer = null;
    stopPing();
    stopPolling();
    if (ws) {
      var old = ws;
      ws = null;
      try { old.close(1000); } catch (e) { /* already closed */ }
    }
  }

  // --- join -----------------------------------------------------------------
  function join() {
    if (joining) return;
    joining = true;
    clearTimeout(joinTimer); joinTimer = null;
    fetch(base + '/join', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Accept': 'application/json', 'Content-Type': 'application/json' },
      body: '{}'
    }).then(function (res) {
      if (res.status === 404) {
        joining = false;
        onFinished('msg_not_found', 'closed', 'This waiting room does not exist.', false);
        return null;
      }
      if (res.status === 409) { // room_closed: nothing to retry
        joining = false;
        onFinished('msg_closed', 'closed', 'This waiting room is closed.', false);
        return null;
      }
      if (!res.ok) throw new Error('join answered ' + res.status);
      return res.json();
    }).then(function (s) {
      if (s === null) return;
      joining = false;
      joinAttempt = 0;
      if (!s || typeof s !== 'object' || typeof s.state !== 'string') throw new Error('bad join answer');
      handleStatus(s);
      if (!done) {
        if (ws) { // the old socket belongs to the old ticket
          var old = ws; ws = null;
          try { old.close(1000); } catch (e) { /* ignore */ }
        }
        stopPing();
        wsAttempt = 0;
        connect();
      }
    }).catch(function () {
      joining = false;
      if (done) return;
      setMessage('msg_retrying', 'retrying', 'Retrying…');
      setConnection('offline');
      var delay = backoff(joinAttempt++);
      joinTimer = setTimeout(join, delay);
    });
  }

  function joinAgain() {
    done = false;
    firstPosition = null;
    ticket = null;
    lastAnnounced = '';
    showJoinAgain(false);
    if (el.cont) el.cont.hidden = true;
    setText(el.position, '–');
    setProgress(0);
    setPageState('joining');
    setMessage('msg_joining', 'joining', 'Joining…');
    setConnection('connecting');
    join();
  }

  // --- WebSocket --------------------------------------------------------------
  function connect() {
    if (done || !ticket || ws) return;
    clearTimeout(wsTimer); wsTimer = null;
    var proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    var url = proto + '//' + location.host + base + '/ws?ticket=' + encodeURIComponent(ticket);
    var sock;
    try {
      sock = new WebSocket(url);
    } catch (e) {
      startPolling();
      scheduleReconnect();
      return;
    }
    ws = sock;
    if (!pollTimer) setConnection(wsAttempt === 0 ? 'connecting' : 'reconnecting');

    sock.onopen = function () {
      if (ws !== sock) return;
      wsAttempt = 0;
      stopPolling();
      setConnection('live');
      stopPing();
      pingTimer = setInterval(function () {
        if (ws === sock && sock.readyState === 1) {
          try { sock.send('{"type":"ping"}'); } catch (e) { /* close follows */ }
        }
      }, PING_MS);
    };
    sock.onmessage = function (ev) {
      if (ws !== sock || typeof ev.data !== 'string') return;
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg && typeof msg === 'object' && msg.type === 'status') handleStatus(msg);
    };
    sock.onerror = function () { /* onclose follows */ };
    sock.onclose = function () {
      if (ws !== sock) return;
      ws = null;
      stopPing();
      if (done) return;
      startPolling();
      scheduleReconnect();
    };
  }

  function scheduleReconnect() {
    if (done || wsTimer) return;
    if (!pollTimer) setConnection('reconnecting');
    var delay = backoff(wsAttempt++);
    wsTimer = setTimeout(function () { wsTimer = null; connect(); }, delay);
  }

  function stopPing() {
    if (pingTimer) { clearInterval(pingTimer); pingTimer = null; }
  }

  // --- polling fallback -----------------------------------------------------
  function startPolling() {
    if (pollTimer || done) return;
    setConnection('reconnecting');
    pollTimer = setInterval(poll, POLL_MS);
    poll();
  }

  function stopPolling() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  }

  function poll() {
    if (done || !ticket || joining) return;
    var asked = ticket;
    fetch(base + '/status', {
      credentials: 'same-origin',
      headers: { 'Accept': 'application/json', 'Authorization': 'Bearer ' + asked }
    }).then(function (res) {
      if (res.status === 401) {
        if (!done && ticket === asked) join();
        return null;
      }
      if (res.status === 404) {
        onFinished('msg_not_found', 'closed', 'This waiting room does not exist.', false);
        return null;
      }
      if (!res.ok) throw new Error('status answered ' + res.status);
      return res.json();
    }).then(function (s) {
      if (s === null || done) return;
      if (!ws || ws.readyState !== 1) setConnection('polling');
      handleStatus(s);
    }).catch(function () {
      if (!done && !ws) setConnection('offline');
    });
  }

  // --- wiring -----------------------------------------------------------------
  if (el.joinAgain) el.joinAgain.addEventListener('click', joinAgain);
  window.addEventListener('online', function () {
    if (done) return;
    if (!ticket) { join(); return; }
    if (!ws) { clearTimeout(wsTimer); wsTimer = null; wsAttempt = 0; connect(); }
  });
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && !done && ticket && !ws) {
      clearTimeout(wsTimer); wsTimer = null; connect();
    }
  });

  if (!room) return;
  setConnection('connecting');
  join();
})();
