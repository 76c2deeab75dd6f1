// A receiver for waitroom's webhook, on Node's standard library alone.
//
// It checks the Waitroom-Signature header (HMAC-SHA256 of "<t>.<body>"
// under the room's notify_webhook_secret, compared in constant time),
// refuses a signature more than 5 minutes from now (a replayed request),
// and answers an event id it has already had as a duplicate (delivery is
// at least once: a retry, or a second node's attempt, sends the same id
// again).
//
//     WEBHOOK_SECRET='the room's notify_webhook_secret' node receiver.js 8000
//
// It listens on 127.0.0.1: put it behind your https proxy.
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');

const SECRET = process.env.WEBHOOK_SECRET;
if (!SECRET) {
  console.error('set WEBHOOK_SECRET');
  process.exit(2);
}
const TOLERANCE_S = 5 * 60; // a signature further from now than this is refused
const REMEMBER_MS = 60 * 60 * 1000; // ids are kept an hour: waitroom retries for 10 minutes
const MAX_BODY_BYTES = 64 * 1024;

// Event id -> when it was first accepted. In memory for the example: with
// more than one process, use your database (a unique key on the id).
const seen = new Map();

// Whether `header` signs `body` (a Buffer) with SECRET, at a time near `nowS`.
function verify(header, body, nowS) {
  let t = null;
  const signatures = [];
  for (const part of (header || '').split(',')) {
    const at = part.indexOf('=');
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (at > 0 && key === 't' && /^[0-9]+$/.test(value)) t = value;
    else if (at > 0 && key === 'v1') signatures.push(Buffer.from(value));
  }
  if (t === null || Math.abs(nowS - Number(t)) > TOLERANCE_S) return false;
  const expected = Buffer.from(
    crypto.createHmac('sha256', SECRET).update(`${t}.`).update(body).digest('hex'),
  );
  return signatures.some(
    (s) => s.length === expected.length && crypto.timingSafeEqual(s, expected),
  );
}

// Records `id`; false if it was already recorded.
function firstTime(id, nowMs) {
  for (const [old, at] of seen) {
    if (nowMs - at > REMEMBER_MS) seen.delete(old);
  }
  if (seen.has(id)) return false;
  seen.set(id, nowMs);
  return true;
}

// Your part: tell the visitor it is nearly their turn ("near") or that it
// is ("admitted"), at event.contact, with event.resume_url. Answer within
// 5 seconds: queue slow work rather than do it here. And never log the
// contact.
function handle(event) {
  console.log(`${event.type} for visitor ${event.visitor} in ${event.room}`);
}

function answer(res, status, message) {
  const body = JSON.stringify(message);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') return answer(res, 405, { error: 'POST only' });
  const chunks = [];
  let length = 0;
  req.on('data', (chunk) => {
    length += chunk.length;
    if (length > MAX_BODY_BYTES) {
      answer(res, 413, { error: 'too large' });
      req.destroy();
    } else {
      chunks.push(chunk);
    }
  });
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const now = Date.now();
    if (!verify(req.headers['waitroom-signature'], body, now / 1000)) {
      return answer(res, 401, { error: 'bad or stale signature' });
    }
    let event;
    try {
      event = JSON.parse(body);
    } catch {
      return answer(res, 400, { error: 'not JSON' });
    }
    if (!firstTime(event.id, now)) return answer(res, 200, { duplicate: true });
    try {
      handle(event);
    } catch {
      seen.delete(event.id); // not handled: let the retry in
      return answer(res, 500, { error: 'not handled' });
    }
    answer(res, 200, { duplicate: false });
  });
});

server.listen(Number(process.argv[2] || 8000), '127.0.0.1');
