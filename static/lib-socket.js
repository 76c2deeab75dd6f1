// Shared status socket: one WebSocket at a time, kept open with pings,
// reconnected with jittered backoff, and a polling loop while it is down.
// It owns the socket and its timers and reports the connection's state; the
// page says where to connect, how to poll, and whether it still wants news.
import { backoff } from './lib-api.js';

// Close code 1012 ("service restart"): the node is stopping and asks its
// sockets to reconnect, which reaches another node behind the balancer.
const SERVICE_RESTART = 1012;
// Such a reconnection waits a random moment up to this long, so that the
// crowd one node held does not land on the others in the same instant; it
// polls only if the reconnection fails.
const RESTART_JITTER_MS = 2000;

// The ws:// or wss:// URL of a path on `base` (an http(s) URL: its origin
// and any path it has, as the API's calls are made under it: a waiting
// room behind a prefix, https://shop.example/queue), or on this page's
// host when there is none.
export function socketUrl(path, base) {
  const at = base ? new URL(base, location.href) : location;
  const proto = at.protocol === 'https:' ? 'wss:' : 'ws:';
  const prefix = base ? at.pathname.replace(/\/+$/, '') : '';
  return proto + '//' + at.host + prefix + path;
}

// opts:
//   url()            where to connect, or null while there is nowhere to
//   protocols()      the subprotocols to offer (optional; none: undefined)
//   active()         false once the page wants no more updates
//   onStatus(msg)    a `{"type":"status",...}` message arrived
//   onConnection(s)  connecting | reconnecting | live (polling and offline
//                    are the page's to report, from its poll)
//   poll()           one status poll; runs every pollMs while the socket is down
//   pingMs, pollMs, retry ({base, max} for backoff(), jittered)
export function statusSocket(opts) {
  let ws = null;
  let attempt = 0;
  let retryTimer = null;
  let pingTimer = null;
  let pollTimer = null;

  function connect() {
    if (!opts.active() || ws) return;
    const url = opts.url();
    if (!url) return;
    clearTimeout(retryTimer); retryTimer = null;
    const protocols = opts.protocols ? opts.protocols() : undefined;
    let sock;
    try {
      sock = protocols ? new WebSocket(url, protocols) : new WebSocket(url);
    } catch (e) {
      startPolling();
      scheduleReconnect();
      return;
    }
    ws = sock;
    if (!pollTimer) opts.onConnection(attempt === 0 ? 'connecting' : 'reconnecting');

    // Handlers as properties: a socket stand-in (tests, old proxies' shims)
    // may only call these.
    sock.onopen = function () {
      if (ws !== sock) return;
      attempt = 0;
      stopPolling();
      opts.onConnection('live');
      stopPing();
      pingTimer = setInterval(function () {
        if (ws === sock && sock.readyState === 1) {
          try { sock.send('{"type":"ping"}'); } catch (e) { /* close follows */ }
        }
      }, opts.pingMs);
    };
    sock.onmessage = function (ev) {
      if (ws !== sock || typeof ev.data !== 'string') return;
      let msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg && typeof msg === 'object' && msg.type === 'status') opts.onStatus(msg);
    };
    sock.onerror = function () { /* onclose follows */ };
    sock.onclose = function (ev) {
      if (ws !== sock) return;
      ws = null;
      stopPing();
      if (!opts.active()) return;
      if (ev && ev.code === SERVICE_RESTART) {
        reconnectAfterRestart();
        return;
      }
      startPolling();
      scheduleReconnect();
    };
  }

  function reconnectAfterRestart() {
    if (retryTimer) return;
    attempt = 0;
    if (!pollTimer) opts.onConnection('reconnecting');
    retryTimer = setTimeout(function () { retryTimer = null; connect(); },
      Math.random() * RESTART_JITTER_MS);
  }

  function scheduleReconnect() {
    if (!opts.active() || retryTimer) return;
    if (!pollTimer) opts.onConnection('reconnecting');
    const delay = backoff(attempt++, { base: opts.retry.base, max: opts.retry.max, jitter: true });
    retryTimer = setTimeout(function () { retryTimer = null; connect(); }, delay);
  }

  function stopPing() {
    if (pingTimer) { clearInterval(pingTimer); pingTimer = null; }
  }

  function startPolling() {
    if (pollTimer || !opts.active()) return;
    opts.onConnection('reconnecting');
    pollTimer = setInterval(opts.poll, opts.pollMs);
    opts.poll();
  }

  function stopPolling() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  }

  // Drops the socket without reconnecting (its close is not reported).
  function drop() {
    if (!ws) return;
    const old = ws;
    ws = null;
    try { old.close(1000); } catch (e) { /* already closed */ }
  }

  return {
    connect,
    // A new socket from a fresh start, e.g. for a new ticket.
    restart() {
      drop();
      stopPing();
      attempt = 0;
      connect();
    },
    // Everything off: socket, reconnect, pings and polling.
    stop() {
      clearTimeout(retryTimer); retryTimer = null;
      stopPing();
      stopPolling();
      drop();
    },
    // Reconnect now rather than at the next backoff step, if the socket is
    // down; `fresh` also starts the backoff over.
    retryNow(fresh) {
      if (ws) return;
      clearTimeout(retryTimer); retryTimer = null;
      if (fresh) attempt = 0;
      connect();
    },
    hasSocket() { return ws !== null; },
    isOpen() { return ws !== null && ws.readyState === 1; },
  };
}
