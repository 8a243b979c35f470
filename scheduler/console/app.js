// The rondo console: a client of the JSON API and nothing else. This file
// is its entry: the router (every screen has its own URL, from the one
// route table in routes.js; links and the back button work) and the page
// frame. The screens are in pages.js, what they share in ui.js.

import { session, api, background, h, link, navigate, onNavigate, errorNodes, languageSwitch } from './ui.js';
import { ROUTES, pattern } from './routes.js';
import { screens } from './pages.js';
import { t, choose, setLanguage } from './i18n.js';


function frame(path) {
  const top = document.getElementById('top');
  top.replaceChildren();
  if (!session.me) return;
  const current = '/' + (path.split('/')[1] || '');
  const items = ROUTES.filter(([, , label, who]) => label && (who !== 'admin' || session.me.role === 'admin'))
    .map(([href, , label]) => {
      const a = link(href, t(label));
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
  }, t('nav.signOut'));
  top.append(h('nav', { 'aria-label': t('nav.main') },
    h('span', { class: 'brand', translate: 'no' }, 'rondo'), ...items,
    h('span', { class: 'user' }, languageSwitch(),
      link('/account', h('span', { translate: 'no' }, session.me.username), ` (${t(`choice.ROLES.${session.me.role}`)})`), out)));
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
      setLanguage(choose(session.me.language));
    } catch (e) {
      if (e.status !== 401 && current()) main.replaceChildren(h('p', { class: 'error-banner' }, ...errorNodes(e)));
      return;
    }
  }
  localizePage();
  if (!current()) return;
  // A password moved from XXL-JOB: the API allows nothing but a new one.
  if (session.me?.must_change_password && path !== '/account' && path !== '/login') {
    navigate('/account', true);
    return;
  }
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
        background.runs += 1;
        try { if ((await fn()) === false) { clearInterval(id); timers.delete(id); } } catch { /* next tick tries again */ } finally { busy = false; background.runs -= 1; }
      }, ms);
      timers.add(id);
    },
  };
  for (const [route, name] of ROUTES) {
    const m = path.match(pattern(route));
    const screen = screens[name];
    if (m) {
      try {
        await screen(view, m.groups || {}, new URLSearchParams(location.search), ctx);
      } catch (e) {
        if (e.status !== 401) view.append(h('p', { class: 'error-banner', role: 'alert' }, ...errorNodes(e)));
      }
      if (current()) main.focus({ preventScroll: true });
      return;
    }
  }
  view.append(h('h1', {}, t('nav.notFound')), h('p', {}, link('/', t('nav.backToDashboard'))));
}

// Timers of the screen shown (live logs, the dashboard's refresh): stopped
// when another screen is drawn.
const timers = new Set();
function stopTimers() {
  for (const id of timers) clearInterval(id);
  timers.clear();
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a[data-link]');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
onNavigate(render);
window.addEventListener('popstate', render);
/** The page's own words (index.html's, in English until this runs) in the
 *  language shown. */
function localizePage() {
  document.title = `rondo · ${t('title.console')}`;
  const skip = document.querySelector('.skip');
  if (skip) skip.textContent = t('nav.skip');
  const loading = document.querySelector('#main > p.muted');
  if (loading) loading.textContent = t('nav.loading');
}

setLanguage(choose(null));
localizePage();
render();
