// Shared DOM and text helpers for the three pages: finding and updating
// nodes without needless writes, reading a page's JSON data, checking
// numbers from the server, and the small formatting the pages share that
// needs no words (the words are the catalogue's: lib-i18n.js).

// --- DOM ---------------------------------------------------------------------
export function $(id) {
  return document.getElementById(id);
}

// Writes only when the text changes, so screen readers and styles are not
// disturbed by updates that change nothing.
export function setText(node, text) {
  if (node && node.textContent !== text) node.textContent = text;
}

export function show(node, visible) {
  if (node) node.hidden = !visible;
}

// The object in a `<script type="application/json">` tag; {} when it is
// missing or not an object.
export function jsonScript(id) {
  try {
    const node = $(id);
    const parsed = node ? JSON.parse(node.textContent || '{}') : {};
    if (parsed && typeof parsed === 'object') return parsed;
  } catch (e) { /* keep the defaults */ }
  return {};
}

// --- numbers from the server ----------------------------------------------------
// A whole number of zero or more.
export function isCount(v) {
  return typeof v === 'number' && isFinite(v) && v >= 0 && Math.floor(v) === v;
}

// Any finite number of zero or more (a figure that may have a fraction).
export function isNonNegative(v) {
  return typeof v === 'number' && isFinite(v) && v >= 0;
}

// --- text -----------------------------------------------------------------------
// Fills `{name}` placeholders; unknown ones stay as they are.
export function fill(text, values) {
  return text.replace(/\{(\w+)\}/g, (m, k) =>
    Object.prototype.hasOwnProperty.call(values, k) ? String(values[k]) : m);
}

export function pad2(n) {
  return (n < 10 ? '0' : '') + n;
}

export function formatCount(n, lang) {
  try { return n.toLocaleString(lang); } catch (e) { return String(n); }
}

// "mm:ss" for a countdown.
export function clock(s) {
  return pad2(Math.floor(s / 60)) + ':' + pad2(s % 60);
}
