// What the console's browser tests share: the cluster they are given
// (tests/tests/console.rs sets it in the environment), the browser, the
// API with the page's session, waiting for a positive signal, the served
// message catalogs, and the check that a page shows no text outside them.

/* global document, NodeFilter -- page.evaluate runs its function in the browser */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/tests/console.rs sets it)`);
  return v;
};
export const BASE = env('RONDO_URL');
export const ADMIN = [env('RONDO_ADMIN_USER'), env('RONDO_ADMIN_PASSWORD')];
export const VIEWER = [env('RONDO_VIEWER_USER'), env('RONDO_VIEWER_PASSWORD')];
export const SHOTS = env('RONDO_SCREENSHOTS');
export const APP = env('RONDO_APP');
mkdirSync(SHOTS, { recursive: true });

export function launch() {
  return chromium.launch({
    executablePath: env('CHROMIUM'),
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** The JSON of a GET with the page's session. */
export const getJson = async (page, path) => {
  const r = await page.request.get(`${BASE}${path}`);
  assert.ok(r.ok(), `GET ${path}: ${r.status()}`);
  return r.json();
};

/** A write with the page's session and its CSRF token. */
export const write = async (page, method, path, data) => {
  const me = await getJson(page, '/api/v1/auth/me');
  return page.request.fetch(`${BASE}${path}`, { method, data, headers: { 'X-CSRF-Token': me.csrf_token } });
};

/** A write that must succeed; its JSON (or null). */
export const writeOk = async (page, method, path, data) => {
  const r = await write(page, method, path, data);
  assert.ok(r.ok(), `${method} ${path}: ${r.status()} ${await r.text()}`);
  const text = await r.text();
  return text ? JSON.parse(text) : null;
};

export const shot = (page, name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

/** Polls `check` (reloading the page between tries) until it is true. */
export async function until(page, what, check, { reload = true, timeout = 60_000 } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(500);
    if (reload) await page.reload();
  }
}

/** A module of the console as served, imported here. */
export async function served(page, file) {
  const text = await (await page.request.get(`${BASE}/assets/${file}`)).text();
  return import(`data:text/javascript;base64,${Buffer.from(text).toString('base64')}`);
}

/** The three catalogs as served: { en, 'zh-CN', 'zh-TW' }. */
export async function catalogs(page) {
  const out = {};
  for (const lang of ['en', 'zh-CN', 'zh-TW']) out[lang] = (await served(page, `messages-${lang}.js`)).default;
  return out;
}

/** Every text the page shows a person (text nodes, and the placeholder,
 *  title, aria-label and alt of elements; not the values of fields), but
 *  for what is marked as not
 *  the page's language: inside `translate="no"` (data from the API:
 *  names, handlers, log lines), or under another `lang` (a language's
 *  own name in the language switch). */
export function shownTexts(page) {
  return page.evaluate(() => {
    const lang = document.documentElement.lang;
    const skipped = (el) => {
      for (let e = el; e; e = e.parentElement) {
        // A textarea's text is its value, as an input's is.
        if (['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'TEXTAREA'].includes(e.tagName)) return true;
        if (e.getAttribute('translate') === 'no') return true;
        if (e.hasAttribute('lang') && e.getAttribute('lang') !== lang) return true;
      }
      return false;
    };
    const out = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const text = n.textContent.trim();
      if (text && !skipped(n.parentElement)) out.push({ text, where: n.parentElement.outerHTML.slice(0, 160) });
    }
    for (const el of document.body.querySelectorAll('[placeholder],[title],[aria-label],[alt]')) {
      if (skipped(el)) continue;
      for (const a of ['placeholder', 'title', 'aria-label', 'alt']) {
        const v = el.getAttribute(a);
        if (v && v.trim()) out.push({ text: v.trim(), where: `${a} of ${el.outerHTML.slice(0, 120)}` });
      }
    }
    return out;
  });
}

/** A URL in a text: its words are an address's, not the language's. */
const URLS = /\bhttps?:\/\/\S+/g;

/** The latin words a catalog's own texts use (product and protocol
 *  names: API, Cron, JobHandler…), which a page in that language may
 *  show; any other latin word came from outside the catalog. Neither a
 *  `{placeholder}`'s name nor an example URL's words count: they are never
 *  shown as words (else "running", "name", "open" or "send" would pass
 *  untranslated). */
export function latinWordsOf(catalog) {
  const words = new Set(['GMT', 'UTC']); // Intl's zone names, in every language
  for (const v of Object.values(catalog)) {
    for (const w of v.replace(/\{\w+\}/g, ' ').replace(URLS, ' ').match(/[A-Za-z]{2,}/g) || []) words.add(w);
  }
  return words;
}

/** The catalog's texts that take values, as patterns: a text made from
 *  one of them (an aria-label naming a trigger id) holds data only where
 *  its `{placeholders}` were. */
function templatesOf(catalog) {
  return Object.values(catalog).filter((v) => /\{\w+\}/.test(v) && v.replace(/\{\w+\}/g, '').trim().length > 1).map((v) => new RegExp(`^${v
    .split(/\{\w+\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.+')}$`, 's'));
}

/** Fails if the page shows, outside what is marked as data, a latin word
 *  the catalog of its language never uses: a string not from the catalog
 *  (a text filled from a catalog template is checked outside its values). */
export async function assertAllTranslated(page, catalog, screen) {
  const allowed = latinWordsOf(catalog);
  const templates = templatesOf(catalog);
  const stray = [];
  for (const { text, where } of await shownTexts(page)) {
    if (templates.some((re) => re.test(text))) continue;
    const unknown = (text.replace(URLS, ' ').match(/[A-Za-z]{2,}/g) || []).filter((w) => !allowed.has(w));
    if (unknown.length) stray.push(`${JSON.stringify(text)} (${unknown.join(', ')}) in ${where}`);
  }
  assert.deepEqual(stray, [], `${screen}: text outside the catalog`);
}
