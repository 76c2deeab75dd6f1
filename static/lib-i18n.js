// The page's texts, in the language the server chose for it: the part of
// the catalogue (static/i18n/{lang}.json) the page's template hands over
// in `<script id="wr-texts" type="application/json">`. Page scripts name
// every text by its literal key, `t('sale.hold')`, so that a test can check
// each key against the English catalogue; a key the page did not get shows
// as itself rather than failing.
import { jsonScript, fill } from './lib-dom.js';

const texts = jsonScript('wr-texts');

// The page's language, as the server set it on <html lang>.
export const lang = document.documentElement.getAttribute('lang') || 'en';

// The text of `key`, its `{name}` placeholders filled from `values`.
export function t(key, values) {
  const text = typeof texts[key] === 'string' ? texts[key] : key;
  return values ? fill(text, values) : text;
}
