// How the client module (static/waitroom-client.js) opens its socket: the
// ticket never in the URL (proxies write URLs to their logs), but as the
// socket's subprotocol, or not at all where the page's cookie goes with it.
// Run by tests/browser/page_scripts.rs with `node --test`, with fetch and WebSocket
// stood in for.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { joinRoom, joinFromGate } from '../../static/waitroom-client.js';

// The page the module runs on.
globalThis.location = new URL('https://shop.example/checkout');

// Every socket opened: its URL and the subprotocols offered (undefined: none).
let sockets = [];
class FakeSocket {
  constructor(url, protocols) {
    this.url = url;
    this.protocols = arguments.length > 1 ? protocols : undefined;
    this.readyState = 0;
    sockets.push(this);
  }
  send() {}
  close() { this.readyState = 3; }
  // What the server does: opens, sends a message, closes.
  open() { this.readyState = 1; this.onopen(); }
  receive(message) { this.onmessage({ data: JSON.stringify(message) }); }
  drop(code) { this.readyState = 3; this.onclose({ code }); }
}
globalThis.WebSocket = FakeSocket;

// Every call made, and the answer each path gets.
let calls = [];
let answers = {};
globalThis.fetch = (url, init) => {
  calls.push({ url, init });
  const path = new URL(url, location.href).pathname;
  const [status, body] = answers[path] || [503, { error: { code: 'x', message: 'x' } }];
  return Promise.resolve({
    status,
    ok: status >= 200 && status < 300,
    headers: { get: () => null },
    text: () => Promise.resolve(JSON.stringify(body)),
  });
};

function waiting(ticket) {
  return { type: 'status', room: 'drop', state: 'waiting', ticket, position: 3 };
}

// Lets the calls' promises run.
async function settle() {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

let place = null;
afterEach(() => {
  if (place) place.close();
  place = null;
  sockets = [];
  calls = [];
  answers = {};
});

test('across origins, the socket carries the ticket as its subprotocol, never in its URL', async () => {
  answers['/api/rooms/drop/join'] = [200, waiting('a.b.c')];
  answers['/api/rooms/drop/status'] = [200, waiting('d.e.f')];
  const kept = [];
  place = joinRoom({ base: 'https://wait.example', room: 'drop', onTicket: (t) => kept.push(t) });
  await settle();
  assert.equal(sockets.length, 1);
  assert.equal(sockets[0].url, 'wss://wait.example/api/rooms/drop/ws');
  assert.deepEqual(sockets[0].protocols, ['waitroom', 'waitroom.ticket.a.b.c']);
  // A newer ticket from a poll is the one the next socket carries.
  sockets[0].open();
  sockets[0].drop(1006);
  await settle();
  assert.deepEqual(kept, ['a.b.c', 'd.e.f']);
  place.retryNow(true);
  assert.equal(sockets.length, 2);
  assert.equal(sockets[1].url, 'wss://wait.example/api/rooms/drop/ws');
  assert.deepEqual(sockets[1].protocols, ['waitroom', 'waitroom.ticket.d.e.f']);
  // The calls carry it as Bearer; no URL holds it.
  for (const call of calls) {
    assert.ok(!call.url.includes('ticket'), call.url);
  }
  assert.ok(calls.some((call) => call.init.headers['Authorization'] === 'Bearer a.b.c'));
});

test('a join retried after a lost answer carries the same Idempotency-Key, another join its own', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  answers['/api/rooms/drop/join'] = [503, { error: { code: 'store_unavailable', message: 'x' } }];
  place = joinRoom({ base: 'https://wait.example', room: 'drop' });
  await settle();
  answers['/api/rooms/drop/join'] = [200, waiting('a.b.c')];
  // Past the backoff's longest first wait (a second, and a fifth of it).
  t.mock.timers.tick(1_300);
  await settle();
  const keys = calls.map((call) => call.init.headers['Idempotency-Key']);
  assert.equal(keys.length, 2);
  assert.ok(keys[0], 'a key is sent');
  assert.equal(keys[1], keys[0], 'the retry finds the place the first try may have made');
  place.close();
  calls = [];
  place = joinRoom({ base: 'https://wait.example', room: 'drop' });
  await settle();
  const other = calls[0].init.headers['Idempotency-Key'];
  assert.ok(other && other !== keys[0], 'another join, another key');
});

test('a waiting room behind a path prefix gets its calls and its socket under it', async () => {
  answers['/queue/api/rooms/drop/join'] = [200, waiting('a.b.c')];
  place = joinRoom({ base: 'https://shop.example/queue/', room: 'drop' });
  await settle();
  assert.equal(calls[0].url, 'https://shop.example/queue/api/rooms/drop/join');
  assert.equal(sockets.length, 1);
  assert.equal(sockets[0].url, 'wss://shop.example/queue/api/rooms/drop/ws');
});

test('a ticket kept from before opens the socket the same way', async () => {
  answers['/api/rooms/drop/status'] = [200, waiting('kept.ticket.x')];
  answers['/api/rooms/drop/join'] = [200, waiting('kept.ticket.x')];
  place = joinRoom({ base: 'https://wait.example', room: 'drop', ticket: 'kept.ticket.x' });
  await settle();
  assert.ok(sockets.length >= 1);
  for (const socket of sockets) {
    assert.equal(socket.url, 'wss://wait.example/api/rooms/drop/ws');
    assert.deepEqual(socket.protocols, ['waitroom', 'waitroom.ticket.kept.ticket.x']);
  }
});

test('with cookieSocket (the waiting page), the socket offers no ticket at all', async () => {
  globalThis.location = new URL('https://wait.example/rooms/drop');
  answers['/api/rooms/drop/join'] = [200, waiting('a.b.c')];
  place = joinRoom({ room: 'drop', cookieSocket: true });
  await settle();
  assert.equal(sockets.length, 1);
  assert.equal(sockets[0].url, 'wss://wait.example/api/rooms/drop/ws');
  assert.equal(sockets[0].protocols, undefined);
});

// The gate's 401 to an app that asked for JSON.
const GATE_REFUSAL = {
  error: { code: 'missing_pass', message: 'send the pass' },
  room: 'drop',
  join_url: 'https://wait.example/api/rooms/drop/join',
  page_url: 'https://wait.example/rooms/drop?return=https%3A%2F%2Fshop.example%2Fapi%2Fcart',
};

test("joinFromGate joins the room the gate's answer names, where it names", async () => {
  globalThis.location = new URL('https://shop.example/checkout');
  answers['/api/rooms/drop/join'] = [200, waiting('a.b.c')];
  const statuses = [];
  place = await joinFromGate(GATE_REFUSAL, {
    base: 'https://elsewhere.example', room: 'other', onStatus: (s) => statuses.push(s),
  });
  await settle();
  assert.equal(calls[0].url, 'https://wait.example/api/rooms/drop/join');
  assert.equal(calls[0].init.method, 'POST');
  assert.equal(sockets[0].url, 'wss://wait.example/api/rooms/drop/ws');
  assert.deepEqual(statuses.map((s) => s.state), ['waiting']);
  assert.equal(place.ticket, 'a.b.c');
});

test('joinFromGate reads a Response itself, and refuses what is not the gate\'s', async () => {
  answers['/api/rooms/drop/join'] = [200, waiting('a.b.c')];
  const response = { status: 401, json: () => Promise.resolve(GATE_REFUSAL) };
  place = await joinFromGate(response, {});
  await settle();
  assert.equal(calls[0].url, 'https://wait.example/api/rooms/drop/join');
  place.close();
  calls = [];
  for (const wrong of [
    null,
    { error: { code: 'missing_pass' } },
    Object.assign({}, GATE_REFUSAL, { join_url: '/api/rooms/drop/join' }),
    Object.assign({}, GATE_REFUSAL, { room: 'other' }),
    Object.assign({}, GATE_REFUSAL, { join_url: 'javascript:alert(1)//api/rooms/drop/join' }),
  ]) {
    await assert.rejects(joinFromGate(wrong, {}), /not the gate's answer/, JSON.stringify(wrong));
  }
  assert.equal(calls.length, 0);
});
