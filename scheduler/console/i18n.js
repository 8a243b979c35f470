// The console's languages: one message catalog per language
// (messages-<lang>.js, each a plain object of key → text), the language
// chosen, and `t`, through which every string the console shows passes.
// The language is the signed-in user's (kept by the API, PUT
// /api/v1/auth/language), else the one last chosen in this browser, else
// the browser's own. Imports nothing of the console but the catalogs.

import en from './messages-en.js';
import zhCN from './messages-zh-CN.js';
import zhTW from './messages-zh-TW.js';

/** The catalogs by language tag. */
export const CATALOGS = { 'zh-CN': zhCN, 'zh-TW': zhTW, en };

/** The languages offered, each named in itself. */
export const LANGUAGES = [['zh-CN', '简体中文'], ['zh-TW', '繁體中文'], ['en', 'English']];

const STORED = 'rondo.language';
let current = 'en';

/** The catalog's language for a BCP 47 tag, or null: zh-TW, zh-HK,
 *  zh-MO and zh-Hant read Traditional; any other zh Simplified. */
export function match(tag) {
  if (!tag) return null;
  const t = String(tag).toLowerCase();
  if (t === 'en' || t.startsWith('en-')) return 'en';
  if (t === 'zh' || t.startsWith('zh-')) {
    return /^zh-(tw|hk|mo|hant)/.test(t) ? 'zh-TW' : 'zh-CN';
  }
  return null;
}

/** The language to show: the user's, this browser's last choice, the
 *  browser's languages in order, else English. */
export function choose(userLanguage) {
  const stored = (() => { try { return localStorage.getItem(STORED); } catch { return null; } })();
  for (const tag of [userLanguage, stored, ...(navigator.languages || [navigator.language])]) {
    const l = match(tag);
    if (l) return l;
  }
  return 'en';
}

/** Shows the console in `l` from now on (the page's `lang` too). */
export function setLanguage(l) {
  current = CATALOGS[l] ? l : 'en';
  document.documentElement.lang = current;
  try { localStorage.setItem(STORED, current); } catch { /* private mode: this page only */ }
}

/** The language shown. */
export const language = () => current;

/** The text of `key` in the language shown, `{name}` replaced by
 *  `params.name`. A key missing from a catalog falls back to English (the
 *  browser test fails on any missing key), then to the key itself. */
export function t(key, params) {
  const text = CATALOGS[current][key] ?? en[key] ?? key;
  if (!params) return text;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}
