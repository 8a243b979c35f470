// What every screen of the console shares: who is signed in, the API
// client (session cookie + CSRF token), navigation inside the console, and
// small DOM helpers. Imports nothing of the console: the screens
// (pages.js) and the router (app.js) build on it.

/** Who is signed in (GET /api/v1/auth/me), or null. */
export const session = { me: null };

/** An API answer that is not a success: its status and `error` body. */
export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `request failed (${status})`);
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

/** An instant in the user's zone, with UTC on hover. */
export function when(ms) {
  if (ms === null || ms === undefined) return h('span', { class: 'muted' }, '—');
  const d = new Date(ms);
  const local = d.toLocaleString(undefined, {
    year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
  const utc = d.toISOString().replace('.000Z', 'Z');
  return h('time', { datetime: d.toISOString(), title: `UTC ${utc}` }, local);
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
    spot.textContent = error.message;
    const control = form.querySelector(`[name="${CSS.escape(error.field)}"]`);
    if (control) control.focus();
  } else {
    banner.textContent = error.field ? `${error.field}: ${error.message}` : error.message;
    banner.hidden = false;
  }
}

export function banner() {
  return h('div', { class: 'error-banner', role: 'alert', hidden: true });
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
