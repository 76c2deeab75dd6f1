// Each room's live chart on the admin page: waiting, active and admitted in
// the last minute, one sample a second (the page's own refresh), over the
// last 30 minutes, drawn as SVG; and a forecast of when the line clears at
// the current rate. The samples are the page state's (admin-state.js).
import { t } from './lib-i18n.js';
import { CHART_SPAN_MS as SPAN_MS } from './admin-state.js';

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 600;
const HEIGHT = 120;
const SERIES = ['waiting', 'active', 'admitted_last_minute'];

// Redraws a room's chart from its samples, and its forecast from its stats.
export function drawRoom(room, samples, stats, now) {
  draw(room, samples, now);
  forecast(room, stats, now);
}

function draw(room, samples, now) {
  const svg = document.getElementById('chart-' + room);
  if (!svg) return;
  let top = 1;
  for (const s of samples) for (const name of SERIES) top = Math.max(top, s[name] || 0);
  for (const name of SERIES) {
    let line = svg.querySelector('polyline[data-series="' + name + '"]');
    if (!line) {
      line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('data-series', name);
      line.setAttribute('class', 'series series-' + name.replace(/_/g, '-'));
      svg.appendChild(line);
    }
    const points = samples.map(function (s) {
      const x = WIDTH - (now - s.at) * WIDTH / SPAN_MS;
      const y = HEIGHT - (s[name] || 0) * (HEIGHT - 4) / top - 2;
      return x.toFixed(1) + ',' + y.toFixed(1);
    });
    line.setAttribute('points', points.join(' '));
  }
  svg.setAttribute('data-samples', String(samples.length));
  svg.setAttribute('data-top', String(top));
}

function forecast(room, stats, now) {
  const out = document.getElementById('forecast-' + room);
  if (!out) return;
  let text;
  if (!stats.waiting) {
    text = t('admin.forecast_nobody');
  } else if (!stats.admitted_last_minute) {
    text = t('admin.forecast_stalled', { waiting: stats.waiting });
  } else {
    const minutes = Math.ceil(stats.waiting / stats.admitted_last_minute);
    const at = new Date(now + minutes * 60000);
    text = t('admin.forecast_clears', {
      rate: stats.admitted_last_minute,
      waiting: stats.waiting,
      minutes,
      time: at.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    });
  }
  if (out.textContent !== text) out.textContent = text;
}
