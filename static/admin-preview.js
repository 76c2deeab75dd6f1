// Operator page: the live preview of a room's waiting page beside its
// `page_*` fields (title, headline, message, logo, colours, footer), drawn
// as the visitor will see them, as the operator types. Texts are set as
// text, never markup; colours through the CSSOM (no inline style under
// the CSP). The server checks the same rules again when the form is saved.

const COLOUR = /^#[0-9a-fA-F]{6}$/;
// The palettes of style.css a background takes: light text on a dark one.
const DARK = { '--surface': '#1a212b', '--text': '#e8edf3', '--muted': '#a9b4c2', '--border': '#2f3a48' };
const LIGHT = { '--surface': '#ffffff', '--text': '#1b2430', '--muted': '#4f5b69', '--border': '#d5dbe2' };

// Relative luminance (WCAG 2) of '#rrggbb'.
function luminance(hex) {
  const channel = (i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

// The luminance below which text on the colour is light, as
// src/words/page.rs decides it.
export function isDark(hex) {
  return luminance(hex) < 0.179;
}

// The accent as text, as src/http/pages/branding.rs writes it: itself
// where it reads (4.5:1) on the page and its cards, else the text colour.
export function accentInk(accent, grounds) {
  const contrast = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)];
    return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
  };
  return grounds.every((ground) => contrast(accent, ground) >= 4.5) ? accent : 'var(--text)';
}

// A logo the page would show: https:// or a path on this site.
export function logoOk(url) {
  if (/\s/.test(url)) return false;
  if (url.startsWith('/')) return !url.startsWith('//') && !url.startsWith('/\\');
  try { return new URL(url).protocol === 'https:'; } catch (e) { return false; }
}

function value(form, name) {
  const input = form.elements.namedItem(name);
  return input && typeof input.value === 'string' ? input.value : '';
}

function setText(node, text) {
  if (node && node.textContent !== text) node.textContent = text;
}

function draw(form, figure) {
  const part = (name) => figure.querySelector('[data-preview="' + name + '"]');
  const page = part('page');
  const headline = value(form, 'page_headline').trim();
  setText(part('headline'), headline || figure.getAttribute('data-name') || '');
  part('headline').classList.toggle('brand-headline', headline !== '');
  const message = value(form, 'page_message');
  const intro = part('message');
  if (intro && !intro.hasAttribute('data-default')) intro.setAttribute('data-default', intro.textContent);
  setText(intro, message.trim() ? message : intro.getAttribute('data-default'));
  const footer = value(form, 'page_footer');
  setText(part('footer'), footer);
  part('footer').hidden = !footer.trim();
  setText(part('title'), value(form, 'page_title').trim());

  const logo = part('logo');
  const url = value(form, 'page_logo_url').trim();
  if (url && logoOk(url)) {
    if (logo.getAttribute('src') !== url) logo.setAttribute('src', url);
    logo.hidden = false;
  } else {
    logo.removeAttribute('src');
    logo.hidden = true;
  }

  const accent = value(form, 'page_accent_color').trim();
  const background = value(form, 'page_background_color').trim();
  const palette = COLOUR.test(background) ? (isDark(background) ? DARK : LIGHT) : null;
  for (const name of Object.keys(LIGHT)) {
    if (palette) page.style.setProperty(name, palette[name]);
    else page.style.removeProperty(name);
  }
  if (palette) page.style.setProperty('--bg', background);
  else page.style.removeProperty('--bg');
  if (COLOUR.test(accent)) {
    page.style.setProperty('--accent', accent);
    page.style.setProperty('--accent-text', isDark(accent) ? '#ffffff' : '#0b1524');
    page.style.setProperty('--accent-soft', 'color-mix(in srgb, ' + accent + ' 16%, var(--surface))');
    const grounds = palette ? [background, palette['--surface']] : ['#f4f6f8', LIGHT['--surface']];
    page.style.setProperty('--accent-ink', accentInk(accent, grounds));
  } else {
    for (const name of ['--accent', '--accent-text', '--accent-soft', '--accent-ink']) page.style.removeProperty(name);
  }
  form.querySelectorAll('[name^="page_"]').forEach(function (input) {
    const bad = input.value.trim() !== '' && (
      (input.name.endsWith('_color') && !COLOUR.test(input.value.trim())) ||
      (input.name === 'page_logo_url' && !logoOk(input.value.trim())));
    input.toggleAttribute('aria-invalid', bad);
  });
}

// Draws every room's preview now, and again on each keystroke in its form;
// `redraw(form)` is for the refresh that brings values changed elsewhere.
export function startPreviews() {
  document.querySelectorAll('figure.page-preview[data-room]').forEach(function (figure) {
    const form = document.getElementById('edit-' + figure.getAttribute('data-room'));
    if (!form) return;
    form.addEventListener('input', function (ev) {
      if (ev.target && typeof ev.target.name === 'string' && ev.target.name.startsWith('page_')) draw(form, figure);
    });
    draw(form, figure);
  });
}

export function redraw(form) {
  const figure = document.getElementById('preview-' + (form.getAttribute('data-room') || ''));
  if (figure) draw(form, figure);
}
