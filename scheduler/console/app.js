// The rondo console: a client of the JSON API and nothing else. This file
// holds what every screen shares: the API client (session cookie + CSRF
// token), the router (every screen has its own URL; links and the back
// button work), the page frame and small DOM helpers. The screens are in
// pages.js.

import { screens } from './pages.js';

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

/** Calls the API; writes carry the session's CSRF token. A 401 (no session,
 *  or it ended) goes to sign-in and keeps the screen asked for. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
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

// ---- router ------------------------------------------------------------

/** Goes to `path` inside the console. */
export function navigate(path, replace) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render();
}

const NAV = [
  ['/', 'Dashboard'],
  ['/jobs', 'Jobs'],
  ['/logs', 'Logs'],
  ['/groups', 'Groups'],
  ['/cluster', 'Cluster'],
  ['/users', 'Users', 'admin'],
  ['/audit', 'Audit', 'admin'],
];

function frame(path) {
  const top = document.getElementById('top');
  top.replaceChildren();
  if (!session.me) return;
  const current = '/' + (path.split('/')[1] || '');
  const items = NAV.filter(([, , who]) => who !== 'admin' || session.me.role === 'admin')
    .map(([href, label]) => {
      const a = link(href, label);
      if (href === current) a.setAttribute('aria-current', 'page');
      return a;
    });
  const out = h('button', {
    type: 'button',
    onclick: async () => {
      try { await api('POST', '/api/v1/auth/logout'); } catch { /* ended anyway */ }
      session.me = null;
      navigate('/login', true);
    },
  }, 'Sign out');
  top.append(h('nav', { 'aria-label': 'Main' },
    h('span', { class: 'brand' }, 'rondo'), ...items,
    h('span', { class: 'user' },
      link('/account', `${session.me.username} (${session.me.role})`), out)));
}

let rendering = 0;

/** Draws the screen of the current URL. Each drawing gets a container of
 *  its own and a context: a screen still waiting for an answer when the
 *  user has moved on draws into its detached container, and its timers
 *  never start (or stop at their next tick). */
async function render() {
  const ticket = ++rendering;
  stopTimers();
  const current = () => ticket === rendering;
  const path = location.pathname;
  const main = document.getElementById('main');
  if (path !== '/login' && !session.me) {
    try {
      session.me = await api('GET', '/api/v1/auth/me');
    } catch (e) {
      if (e.status !== 401 && current()) main.replaceChildren(h('p', { class: 'error-banner' }, e.message));
      return;
    }
  }
  if (!current()) return;
  frame(path);
  const view = h('div', { class: 'view' });
  main.replaceChildren(view);
  const ctx = {
    current,
    /** Runs `fn` every `ms` while this screen is shown, one run at a time. */
    every(ms, fn) {
      if (!current()) return;
      let busy = false;
      const id = setInterval(async () => {
        if (!current()) { clearInterval(id); timers.delete(id); return; }
        if (busy) return;
        busy = true;
        try { if ((await fn()) === false) { clearInterval(id); timers.delete(id); } } catch { /* next tick tries again */ } finally { busy = false; }
      }, ms);
      timers.add(id);
    },
  };
  for (const [pattern, screen] of screens) {
    const m = path.match(pattern);
    if (m) {
      try {
        await screen(view, m.groups || {}, new URLSearchParams(location.search), ctx);
      } catch (e) {
        if (e.status !== 401) view.append(h('p', { class: 'error-banner', role: 'alert' }, e.message));
      }
      if (current()) main.focus({ preventScroll: true });
      return;
    }
  }
  view.append(h('h1', {}, 'Not found'), h('p', {}, link('/', 'Back to the dashboard')));
}

// Timers of the screen shown (live logs, the dashboard's refresh): stopped
// when another screen is drawn.
const timers = new Set();
function stopTimers() {
  for (const id of timers) clearInterval(id);
  timers.clear();
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

document.addEventListener('click', (e) => {
  const a = e.target.closest('a[data-link]');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', render);
render();
