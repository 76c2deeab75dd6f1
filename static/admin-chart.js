// Each room's live chart on the admin page: waiting, active and admitted in
// the last minute, one sample a second (the page's own refresh), over the
// last 30 minutes, drawn as SVG; and a forecast of when the line clears at
// the current rate. The history lives in this page only: a chart starts
// when the page opens, and watching costs the store nothing more.

const SVG = 'http://www.w3.org/2000/svg';
const SPAN_MS = 30 * 60 * 1000;
const WIDTH = 600;
const HEIGHT = 120;
const SERIES = ['waiting', 'active', 'admitted_last_minute'];

const history = {};

// Records one sample of a room's stats and redraws its chart and forecast.
export function record(room, stats, now) {
  const samples = history[room] || (history[room] = []);
  samples.push({ at: now, waiting: stats.waiting, active: stats.active, admitted_last_minute: stats.admitted_last_minute });
  while (samples.length && samples[0].at < now - SPAN_MS) samples.shift();
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
    text = 'Nobody is waiting.';
  } else if (!stats.admitted_last_minute) {
    text = stats.waiting + ' waiting, nobody admitted in the last minute: no forecast at this rate.';
  } else {
    const minutes = Math.ceil(stats.waiting / stats.admitted_last_minute);
    const at = new Date(now + minutes * 60000);
    text = 'At ' + stats.admitted_last_minute + ' a minute, the line of ' + stats.waiting +
      ' clears in about ' + minutes + ' min (around ' +
      at.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) + ').';
  }
  if (out.textContent !== text) out.textContent = text;
}
