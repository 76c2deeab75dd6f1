// Shared JSON calls to the app's API: one request helper (same-origin
// unless asked) that
// resolves for any HTTP answer, readers for the `{"error":{"code","message"}}`
// error shape, retry delays, and Idempotency-Key values.

// One JSON call. Resolves to {status, ok, body, parsed, date, retryAfter,
// sent, got} for any HTTP answer: `body` is the parsed JSON or null, `parsed`
// says whether the answer was JSON at all, `date` and `retryAfter` are those
// headers (or ''), `sent` and
// `got` are this browser's clock around the call. Rejects only when the
// server could not be reached.
//   opts.body     sent as JSON (with a Content-Type) unless undefined
//   opts.headers  added after Accept (and Content-Type)
//   opts.cache    the fetch cache mode, e.g. 'no-store'
//   opts.credentials  the fetch credentials mode (default 'same-origin';
//                 waitroom-client.js asks 'include', for calls across origins)
export function request(method, url, opts) {
  const o = opts || {};
  const headers = { 'Accept': 'application/json' };
  if (o.body !== undefined) headers['Content-Type'] = 'application/json';
  if (o.headers) Object.assign(headers, o.headers);
  const init = { method, credentials: o.credentials || 'same-origin', headers };
  if (o.cache) init.cache = o.cache;
  if (o.body !== undefined) init.body = JSON.stringify(o.body);
  const sent = Date.now();
  return fetch(url, init).then((res) => {
    const got = Date.now();
    const answer = {
      status: res.status, ok: res.ok, body: null, parsed: false,
      date: res.headers.get('Date') || '', retryAfter: res.headers.get('Retry-After') || '',
      sent, got
    };
    if (res.status === 204) return answer;
    return res.text().then((text) => {
      try {
        answer.body = JSON.parse(text);
        answer.parsed = true;
      } catch (e) { /* not JSON: body stays null */ }
      return answer;
    });
  });
}

// The error's machine-readable code, or '' when the answer has none.
export function errorCode(res) {
  const e = res.body && res.body.error;
  return e && typeof e.code === 'string' ? e.code : '';
}

// The error's message for people, or '' when the answer has none.
export function errorMessage(res) {
  const e = res.body && res.body.error;
  return e && typeof e.message === 'string' ? e.message : '';
}

// How long to wait before retry number `attempt` (0 for the first): doubling
// from `base` up to `max`, the doubling stopped after `cap` steps. With
// `jitter`, +-20% so that a crowd dropped at once does not come back at once.
export function backoff(attempt, opts) {
  const cap = opts.cap === undefined ? 16 : opts.cap;
  const d = Math.min(opts.max, opts.base * Math.pow(2, Math.min(attempt, cap)));
  if (!opts.jitter) return d;
  return Math.min(opts.max, Math.round(d * (0.8 + Math.random() * 0.4)));
}

// A fresh Idempotency-Key.
export function newKey() {
  const c = globalThis.crypto;
  try {
    if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  } catch (e) { /* not a secure context */ }
  if (c && typeof c.getRandomValues === 'function') {
    const bytes = new Uint8Array(16);
    c.getRandomValues(bytes);
    let hex = '';
    for (let i = 0; i < bytes.length; i++) hex += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
    return hex;
  }
  return Date.now().toString(36) + '-' + Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
}
