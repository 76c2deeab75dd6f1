// Solves a proof-of-work challenge (ALTCHA's format) off the page's thread:
// finds the number n in [0, maxnumber] with SHA-256(salt + n) = challenge.
// Written here rather than taken from ALTCHA's widget, which brings its own
// form and UI: the waiting page needs only these few lines over the
// browser's crypto.subtle.
self.onmessage = async function (event) {
  const c = event.data;
  const encoder = new TextEncoder();
  const started = Date.now();
  for (let n = 0; n <= c.maxnumber; n++) {
    const digest = await crypto.subtle.digest('SHA-256', encoder.encode(c.salt + n));
    if (hex(digest) === c.challenge) {
      self.postMessage({ number: n, took: Date.now() - started });
      return;
    }
  }
  self.postMessage({ number: null, took: Date.now() - started });
};

function hex(buffer) {
  const bytes = new Uint8Array(buffer);
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
  return out;
}
