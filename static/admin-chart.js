// Each room's chart on the admin page, readable at a glance: waiting,
// active and admitted per minute over the last hour (the node's history of
// the room, then the page's own samples; admin-state.js), on a y scale
// with a rounded top and gridlines, with time labels (−60 min, −30 min,
// now), the cap (`max_active`) as a line when set, a legend with each
// series' current value, and the forecast of when the line empties: the
// waiting count projected to zero at the last minute's rate, dashed, with
// its time written next to it; and, for a room with autotune, a mark at
// each change it made to the rate, its reason the mark's title. SVG
// attributes and classes only: the page's Content-Security-Policy allows
// no inline style. What comes from the server is written as text.
import { t } from './lib-i18n.js';
import { CHART_SPAN_MS as SPAN_MS } from './admin-state.js';

const SVG = 'http://www.w3.org/2000/svg';
// The viewBox is 800 × 220: the past from LEFT (−60 min) to NOW_X, the
// forecast's future (about 14 minutes) from NOW_X to RIGHT, the values from
// BOTTOM (0) up to TOP, the time labels under them.
const LEFT = 52;
const NOW_X = 680;
const RIGHT = 790;
const TOP = 14;
const BOTTOM = 188;
const PX_PER_MS = (NOW_X - LEFT) / SPAN_MS;
const GRID_STEPS = 4;
const SERIES = ['waiting', 'active', 'admitted_last_minute'];
const TIME_LABELS = [
  { text: () => t('admin.chart_minus_60'), x: LEFT, anchor: 'start', at: '-60' },
  { text: () => t('admin.chart_minus_30'), x: (LEFT + NOW_X) / 2, anchor: 'middle', at: '-30' },
  { text: () => t('admin.chart_now'), x: NOW_X, anchor: 'middle', at: '0' }
];

// Redraws a room's chart from its samples (oldest first), and its legend
// and forecast from `figures`: its stats now, with `max_active`. `offset`
// is this browser's clock less the node's, which autotune's changes are
// timed by.
export function drawRoom(room, samples, figures, now, offset) {
  const svg = document.getElementById('chart-' + room);
  if (svg) {
    const parts = ensureParts(svg);
    const top = scaleTop(samples, figures);
    const y = (v) => BOTTOM - (v || 0) * (BOTTOM - TOP) / top;
    drawScale(parts, top);
    drawSeries(parts, samples, now, y);
    drawCap(parts, figures.max_active, y);
    drawProjection(parts, figures, now, y);
    drawMarks(parts, changesOf(figures), now, offset || 0);
    svg.setAttribute('data-samples', String(samples.length));
    svg.setAttribute('data-top', String(top));
    legend(svg, figures);
  }
  forecast(room, figures, now);
}

// The smallest 1, 2 or 5 × 10^k step whose GRID_STEPS reach `max`.
export function niceStep(max) {
  const rough = Math.max(max, 1) / GRID_STEPS;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  for (const m of [1, 2, 5, 10]) {
    if (m * power >= rough) return Math.max(1, m * power);
  }
  return 10 * power;
}

function scaleTop(samples, figures) {
  let max = 0;
  for (const s of samples) for (const name of SERIES) max = Math.max(max, s[name] || 0);
  for (const name of SERIES) max = Math.max(max, figures[name] || 0);
  if (typeof figures.max_active === 'number') max = Math.max(max, figures.max_active);
  return niceStep(max) * GRID_STEPS;
}

function el(parent, name, attrs) {
  const node = document.createElementNS(SVG, name);
  for (const key in attrs) node.setAttribute(key, String(attrs[key]));
  parent.appendChild(node);
  return node;
}

function set(node, attrs) {
  for (const key in attrs) {
    const value = String(attrs[key]);
    if (node.getAttribute(key) !== value) node.setAttribute(key, value);
  }
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function show(node, shown) {
  node.classList.toggle('is-hidden', !shown);
}

// The chart's parts, made once: gridlines and their values, the time
// labels and the line at now, the series, the cap and the projection.
function ensureParts(svg) {
  if (svg.wrParts) return svg.wrParts;
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const grid = el(svg, 'g', { class: 'grid' });
  const gridLines = [];
  const gridLabels = [];
  for (let i = 0; i <= GRID_STEPS; i++) {
    gridLines.push(el(grid, 'line', { class: 'grid-line', x1: LEFT, x2: RIGHT }));
    gridLabels.push(el(grid, 'text', { class: 'axis-label y-label', x: LEFT - 6, 'text-anchor': 'end', 'dominant-baseline': 'middle' }));
  }
  const axis = el(svg, 'g', { class: 'time-axis' });
  el(axis, 'line', { class: 'now-line', x1: NOW_X, x2: NOW_X, y1: TOP, y2: BOTTOM });
  for (const label of TIME_LABELS) {
    const text = el(axis, 'text', { class: 'axis-label time-label', x: label.x, y: BOTTOM + 20, 'text-anchor': label.anchor, 'data-at': label.at });
    text.textContent = label.text();
  }
  const series = {};
  for (const name of SERIES) {
    series[name] = el(svg, 'polyline', { class: 'series series-' + name.replace(/_/g, '-'), 'data-series': name, points: '' });
  }
  // Over the series, so a mark's title shows under the pointer.
  const markLayer = el(svg, 'g', { class: 'autotune-marks' });
  // Over the series: the cap stays visible when `active` runs along it.
  const cap = el(svg, 'line', { class: 'cap-line is-hidden', x1: LEFT, x2: NOW_X, 'data-series': 'max_active' });
  const capLabel = el(svg, 'text', { class: 'cap-label is-hidden', x: LEFT + 4, 'dominant-baseline': 'auto' });
  const projection = el(svg, 'line', { class: 'forecast-line is-hidden', x1: NOW_X });
  const projectionLabel = el(svg, 'text', { class: 'forecast-label', x: RIGHT, y: TOP + 4, 'text-anchor': 'end', 'dominant-baseline': 'hanging' });
  svg.wrParts = { gridLines, gridLabels, cap, capLabel, series, projection, projectionLabel, markLayer, marks: {} };
  return svg.wrParts;
}

function drawScale(parts, top) {
  for (let i = 0; i <= GRID_STEPS; i++) {
    const value = top * i / GRID_STEPS;
    const y = (BOTTOM - (BOTTOM - TOP) * i / GRID_STEPS).toFixed(1);
    set(parts.gridLines[i], { y1: y, y2: y });
    set(parts.gridLabels[i], { y });
    setText(parts.gridLabels[i], value.toLocaleString());
  }
}

function drawSeries(parts, samples, now, y) {
  for (const name of SERIES) {
    const points = [];
    for (const s of samples) {
      const x = NOW_X - (now - s.at) * PX_PER_MS;
      if (x < LEFT - 0.5) continue;
      points.push(x.toFixed(1) + ',' + y(s[name]).toFixed(1));
    }
    set(parts.series[name], { points: points.join(' ') });
  }
}

function drawCap(parts, cap, y) {
  const capped = typeof cap === 'number';
  show(parts.cap, capped);
  show(parts.capLabel, capped);
  if (!capped) return;
  const at = y(cap).toFixed(1);
  set(parts.cap, { y1: at, y2: at, 'data-value': cap });
  set(parts.capLabel, { y: (y(cap) - 3).toFixed(1) });
  setText(parts.capLabel, t('admin.chart_cap_line', { cap: cap.toLocaleString() }));
}

// Autotune's changes of the rate in a room's stats, oldest first.
function changesOf(figures) {
  const tune = figures.autotune;
  return tune && typeof tune === 'object' && Array.isArray(tune.changes) ? tune.changes : [];
}

// A mark at each change within the chart's span: a dotted line at its time
// and a triangle pointing the way the rate went, the change in words as
// its title (the tooltip). Marks are kept by change, so one under the
// pointer stays put while the chart moves on.
function drawMarks(parts, changes, now, offset) {
  const shown = {};
  for (const change of changes) {
    const at = Date.parse(change && change.at);
    if (isNaN(at)) continue;
    const x = NOW_X - (now - (at + offset)) * PX_PER_MS;
    if (x < LEFT - 0.5 || x > NOW_X + 0.5) continue;
    const key = change.at + ' ' + change.from + ' ' + change.to;
    shown[key] = true;
    const mark = parts.marks[key] || (parts.marks[key] = newMark(parts.markLayer, change));
    set(mark, { transform: 'translate(' + x.toFixed(1) + ' 0)' });
  }
  for (const key of Object.keys(parts.marks)) {
    if (shown[key]) continue;
    parts.markLayer.removeChild(parts.marks[key]);
    delete parts.marks[key];
  }
  const svg = parts.markLayer.ownerSVGElement;
  if (svg) svg.setAttribute('data-marks', String(Object.keys(shown).length));
}

function newMark(layer, change) {
  const down = change.to < change.from;
  const mark = el(layer, 'g', {
    class: 'autotune-mark ' + (down ? 'mark-down' : 'mark-up'),
    'data-at': change.at, 'data-from': change.from, 'data-to': change.to
  });
  el(mark, 'title', {}).textContent = t('admin.autotune_change', {
    time: change.at, from: change.from, to: change.to, reason: String(change.reason || '')
  });
  el(mark, 'rect', { class: 'mark-hit', x: -5, y: TOP, width: 10, height: BOTTOM - TOP });
  el(mark, 'line', { x1: 0, x2: 0, y1: TOP + 9, y2: BOTTOM });
  const tip = down ? [TOP + 9, TOP] : [TOP, TOP + 9];
  el(mark, 'path', { d: 'M-5,' + tip[1] + ' L5,' + tip[1] + ' L0,' + tip[0] + ' Z' });
  return mark;
}

// How long the line takes to empty at the last minute's rate, in ms; null
// when nobody waits or nobody was admitted.
function emptiesIn(figures) {
  if (!figures.waiting || !figures.admitted_last_minute) return null;
  return figures.waiting / figures.admitted_last_minute * 60000;
}

function clockTime(at) {
  return new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

// The dashed projection of `waiting` from now to zero, cut at the chart's
// right edge when the line empties later than that, and its time.
function drawProjection(parts, figures, now, y) {
  const ms = emptiesIn(figures);
  const label = parts.projectionLabel;
  if (ms === null) {
    show(parts.projection, false);
    const state = figures.waiting ? 'stalled' : 'nobody';
    set(label, { 'data-state': state });
    setText(label, figures.waiting ? t('admin.chart_stalled') : t('admin.chart_nobody'));
    return;
  }
  const y0 = y(figures.waiting);
  const zeroX = NOW_X + ms * PX_PER_MS;
  const endX = Math.min(zeroX, RIGHT);
  const endY = y0 + (BOTTOM - y0) * (endX - NOW_X) / (zeroX - NOW_X);
  show(parts.projection, true);
  set(parts.projection, { y1: y0.toFixed(1), x2: endX.toFixed(1), y2: endY.toFixed(1) });
  set(label, { 'data-state': 'empties', 'data-empties-at': new Date(now + ms).toISOString() });
  setText(label, t('admin.chart_empties', { time: clockTime(now + ms) }));
}

// The legend's current values, next to each series' name.
function legend(svg, figures) {
  const figure = svg.closest('figure');
  if (!figure) return;
  const values = figure.querySelectorAll('[data-legend]');
  for (let i = 0; i < values.length; i++) {
    const name = values[i].getAttribute('data-legend');
    const v = figures[name];
    let text;
    if (name === 'max_active') {
      text = typeof v === 'number' ? v.toLocaleString() : t('admin.chart_no_cap');
    } else if (typeof v === 'number') {
      text = v.toLocaleString();
    } else {
      continue;
    }
    setText(values[i], text);
  }
}

function forecast(room, figures, now) {
  const out = document.getElementById('forecast-' + room);
  if (!out) return;
  let text;
  if (!figures.waiting) {
    text = t('admin.forecast_nobody');
  } else if (!figures.admitted_last_minute) {
    text = t('admin.forecast_stalled', { waiting: figures.waiting });
  } else {
    text = t('admin.forecast_clears', {
      rate: figures.admitted_last_minute,
      waiting: figures.waiting,
      minutes: Math.ceil(figures.waiting / figures.admitted_last_minute),
      time: clockTime(now + emptiesIn(figures))
    });
  }
  if (out.textContent !== text) out.textContent = text;
}
