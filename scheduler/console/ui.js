// What every screen of the console shares: who is signed in, the API
// client (session cookie + CSRF token), navigation inside the console, and
// small DOM helpers. Imports nothing of the console but its languages
// (i18n.js): the screens (pages.js) and the router (app.js) build on it.

import { t, language, setLanguage, LANGUAGES } from './i18n.js';

/** Who is signed in (GET /api/v1/auth/me), or null. */
export const session = { me: null };

/** An API answer that is not a success: its status and `error` body. */
export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `request failed (${status})`);
    /** The API's own text (English), kept as it answered. */
    this.apiMessage = error.message || null;
    this.status = status;
    this.field = error.field || null;
    this.kind = error.kind || null;
  }
}

/** How many background runs (a screen's polling) are under way: their
 *  requests say so, and do not keep an idle session alive. */
export const background = { runs: 0 };

/** Calls the API; writes carry the session's CSRF token. A 401 (no session,
 *  or it ended) goes to sign-in and keeps the screen asked for. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (background.runs > 0) headers['X-Rondo-Background'] = '1';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && session.me && session.me.csrf_token) {
    headers['X-CSRF-Token'] = session.me.csrf_token;
  }
  const response = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: { message: text } }; }
  if (response.status === 401 && !path.startsWith('/api/v1/auth/login')) {
    session.me = null;
    toSignIn();
    throw new ApiError(401, data);
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/** The query string of the pairs that have a value. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

function toSignIn() {
  const here = location.pathname + location.search;
  if (location.pathname !== '/login') {
    navigate(`/login${query({ next: here })}`, true);
  }
}

// ---- DOM helpers -------------------------------------------------------

/** Builds an element: h('a', {href: '/x', class: 'y'}, 'text', child…).
 *  Text is always text (never parsed as HTML). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** A link inside the console (no reload). */
export function link(href, ...children) {
  return h('a', { href, 'data-link': true }, ...children);
}

/** An instant in the language's format with its zone's name: in `zone`
 *  (a job's IANA zone), else in the browser's zone; UTC on hover. */
export function when(ms, zone) {
  if (ms === null || ms === undefined) return h('span', { class: 'muted' }, '—');
  const d = new Date(Number(ms));
  const utc = d.toISOString().replace('.000Z', 'Z');
  return h('time', { datetime: d.toISOString(), title: `UTC ${utc}` }, formatTime(d, zone));
}

/** `d` as the language writes a date and time, in `zone` if given. */
export function formatTime(d, zone) {
  const options = {
    year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
  };
  if (zone) {
    try {
      return new Intl.DateTimeFormat(language(), { ...options, timeZone: zone }).format(d);
    } catch { /* a zone the browser does not know: the browser's own */ }
  }
  return new Intl.DateTimeFormat(language(), options).format(d);
}

/** The sentence for an API error in the language shown (by its kind). */
export function errorText(error) {
  const kind = error && error.kind;
  const key = kind ? `error.${kind}` : 'error.other';
  const text = t(key);
  return text === key ? t('error.other') : text;
}

/** An API error shown: the translated sentence, then the API's own
 *  English message (its field names are the API's), marked as English. */
export function errorNodes(error) {
  const own = error && (error.apiMessage || error.message);
  return [errorText(error), own ? ' ' : null,
    own ? h('span', { class: 'api-message', lang: 'en', translate: 'no' }, own) : null];
}

/** Shows `error` in a banner (role alert). */
export function showBanner(spot, error) {
  spot.replaceChildren(...errorNodes(error));
  spot.hidden = false;
}

/** A form field: label, control, hint and the line where the API's error
 *  for field `name` is shown (outside the label, so the control's name is
 *  its label alone; the error is its description). */
export function field(label, name, control, hint) {
  control.id = control.id || `f-${name}`;
  control.name = name;
  const error = h('span', { class: 'field-error', id: `err-${name}`, role: 'alert' });
  const described = [hint ? `hint-${name}` : null, `err-${name}`].filter(Boolean).join(' ');
  control.setAttribute('aria-describedby', described);
  return h('div', { class: control.dataset.wide ? 'field wide' : 'field' },
    h('label', { for: control.id }, label), control,
    hint ? h('span', { class: 'hint', id: `hint-${name}` }, hint) : null, error);
}

/** Shows an API error next to its field in `form` (or in `banner`). */
export function showError(form, banner, error) {
  for (const el of form.querySelectorAll('.field-error')) el.textContent = '';
  banner.textContent = '';
  banner.hidden = true;
  const spot = error.field && form.querySelector(`#err-${CSS.escape(error.field)}`);
  if (spot) {
    spot.replaceChildren(...errorNodes(error));
    const control = form.querySelector(`[name="${CSS.escape(error.field)}"]`);
    if (control) control.focus();
  } else {
    banner.replaceChildren(...errorNodes(error));
    if (error.field) banner.append(' ', h('code', { translate: 'no' }, error.field));
    banner.hidden = false;
  }
}

export function banner() {
  return h('div', { class: 'error-banner', role: 'alert', hidden: true });
}

/** The language switch: remembered in this browser, and for a signed-in
 *  user by the API (so it follows them to another browser). */
export function languageSwitch() {
  const pick = h('select', { id: 'language', 'aria-label': t('nav.language') },
    ...LANGUAGES.map(([tag, name]) => h('option', { value: tag, lang: tag, selected: tag === language() }, name)));
  pick.addEventListener('change', async () => {
    setLanguage(pick.value);
    if (session.me && !session.me.read_only) {
      try {
        await api('PUT', '/api/v1/auth/language', { language: pick.value });
        session.me.language = pick.value;
      } catch { /* kept in this browser; the next sign-in tries again */ }
    }
    drawn();
  });
  return pick;
}

/** The role may change things in `group` (operator of it, or admin), and
 *  the session is not read-only. */
export function mayOperate(group) {
  const me = session.me;
  if (!me || me.read_only) return false;
  if (me.role === 'admin') return true;
  return me.role === 'operator' && (group === undefined || me.groups.includes(group));
}

export const isAdmin = () => session.me && session.me.role === 'admin' && !session.me.read_only;

/** Goes to `path` inside the console. */
export function navigate(path, replace) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  drawn();
}

// What draws the screen of the current URL: app.js, which holds the
// router, says so at start (so this file needs nothing of it).
let drawn = () => {};

/** Sets what `navigate` calls to draw the new screen. */
export function onNavigate(draw) {
  drawn = draw;
}

/** A same-origin console path from a `next` parameter, or '/'. */
export function safeNext(next) {
  if (!next) return '/';
  try {
    const url = new URL(next, location.origin);
    if (url.origin !== location.origin || url.pathname === '/login') return '/';
    return url.pathname + url.search + url.hash;
  } catch {
    return '/';
  }
}
