// Sign-in, one's account, users (admins) and the audit log.

import { session, api, query, h, link, when, field, showError, showBanner, banner, navigate, safeNext, languageSwitch } from './ui.js';
import { t, setLanguage, choose } from './i18n.js';
import { ROLES } from './choices.js';
import { choice, explained, input, toMs, toLocalInput, groupBoxes, datePresets, changeList } from './widgets.js';

export async function login(main, _, params) {
  const err = banner();
  const user = input('', { autocomplete: 'username', required: true });
  const pass = input('', { type: 'password', autocomplete: 'current-password', required: true });
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const s = await api('POST', '/api/v1/auth/login', { username: user.value, password: pass.value });
        session.me = { ...s, read_only: false, via: 'session' };
        setLanguage(choose(s.language));
        navigate(s.must_change_password ? '/account' : safeNext(params.get('next')), true);
      } catch (e2) {
        showError(form, err, e2);
      }
    },
  },
  h('h1', {}, t('login.title')),
  field(t('login.username'), 'username', user),
  field(t('login.password'), 'password', pass),
  err,
  h('button', { type: 'submit', class: 'primary' }, t('login.submit')));
  main.append(h('div', { class: 'login' }, h('div', { class: 'login-language' }, languageSwitch()), form));
  user.focus();
}

export async function account(main) {
  const me = session.me;
  main.append(h('h1', {}, t('account.title')), h('p', {}, h('span', { translate: 'no' }, me.username), ', ', t(`choice.ROLES.${me.role}`),
    me.groups.length ? [t('account.ofGroups'), h('span', { translate: 'no' }, me.groups.join(', '))] : null));
  const err = banner();
  const current = input('', { type: 'password', autocomplete: 'current-password' });
  const next = input('', { type: 'password', autocomplete: 'new-password' });
  const done = h('p', { role: 'status' });
  const form = h('form', { class: 'form', 'aria-label': t('account.changePassword'), onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api('PUT', '/api/v1/auth/password', { current_password: current.value, new_password: next.value });
      current.value = ''; next.value = '';
      if (me.must_change_password) {
        me.must_change_password = false;
        navigate('/', true);
        return;
      }
      done.textContent = t('account.passwordChanged');
    } catch (e2) { showError(form, err, e2); }
  } }, field(t('account.currentPassword'), 'current_password', current), field(t('account.newPassword'), 'new_password', next, t('account.passwordRule')),
  h('div', { class: 'wide' }, err, done, h('button', { type: 'submit', class: 'primary' }, t('account.changePassword'))));
  if (me.must_change_password) {
    main.append(h('p', { class: 'error-banner', role: 'alert' }, t('account.mustChangePassword')), form);
    current.focus();
    return;
  }
  main.append(h('h2', {}, t('account.password')), form);

  // The caller's own tokens (an admin's list would hold everyone's).
  const tokens = await api('GET', `/api/v1/tokens${query({ user: me.username })}`);
  const now = Date.now();
  const active = tokens.items.filter((t) => !t.revoked_ms && !(t.expires_ms && t.expires_ms <= now));
  const terr = banner();
  const name = input('', { required: true, maxlength: 64 });
  const days = input(90, { type: 'number', min: 1, max: 365 });
  const readOnly = h('input', { type: 'checkbox' });
  const shownToken = h('p', { role: 'status' });
  const tform = h('form', { class: 'form', 'aria-label': t('account.newToken'), onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await api('POST', '/api/v1/tokens', { name: name.value, expires_in_days: Number(days.value), read_only: readOnly.checked });
      shownToken.replaceChildren(t('account.tokenShownOnce'), ' ', h('code', { id: 'new-token', translate: 'no' }, made.token));
      tbody.prepend(tokenRow(made));
      name.value = '';
    } catch (e2) { showError(tform, terr, e2); }
  } }, field(t('account.tokenName'), 'name', name), field(t('account.expiresInDays'), 'expires_in_days', days),
  field(t('account.readOnly'), 'read_only', readOnly), h('div', { class: 'wide' }, terr, shownToken, h('button', { type: 'submit' }, t('account.createToken'))));
  const tokenRow = (tok) => {
    const row = h('tr', {}, h('td', { translate: 'no' }, tok.name), h('td', {}, h('code', { translate: 'no' }, tok.prefix)), h('td', {}, tok.read_only ? t('account.rightsReadOnly') : t('account.rightsFull')),
      h('td', {}, when(tok.created_ms)), h('td', {}, when(tok.expires_ms)), h('td', {}, when(tok.last_used_ms)),
      h('td', {}, h('button', { type: 'button', 'aria-label': t('account.revokeToken', { name: tok.name }), onclick: async () => {
        if (!confirm(t('account.revokeConfirm', { name: tok.name }))) return;
        try { await api('DELETE', `/api/v1/tokens/${tok.id}`); row.remove(); } catch (e2) { showBanner(terr, e2); }
      } }, t('account.revoke'))));
    return row;
  };
  const tbody = h('tbody', {}, ...active.map(tokenRow));
  main.append(h('h2', {}, t('account.tokens')), h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['account.tokenName', 'account.prefix', 'account.rights', 'common.created', 'account.expires', 'account.lastUsed', ''].map((k) => h('th', { scope: 'col' }, k ? t(k) : '')))),
    tbody)), tform);
}

export async function users(main) {
  main.append(h('h1', {}, t('users.title')));
  const [list, groups] = await Promise.all([api('GET', '/api/v1/users'), api('GET', '/api/v1/groups')]);
  const apps = groups.map((g) => g.app);
  const roleSelect = (value) => choice(ROLES, value, 'ROLES');
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['users.user', 'users.role', 'users.groups', 'users.enabled', 'common.changed'].map((k) => h('th', { scope: 'col' }, t(k))))),
    h('tbody', {}, ...list.items.map((u) => h('tr', {},
      h('td', { translate: 'no' }, link(`/users/${encodeURIComponent(u.username)}`, u.username)), h('td', {}, t(`choice.ROLES.${u.role}`)),
      h('td', {}, u.role === 'admin' ? t('users.allGroups') : h('span', { translate: 'no' }, u.groups.join(', ') || '—')),
      h('td', {}, u.enabled ? t('common.yes') : h('span', { class: 'bad' }, t('users.disabled'))), h('td', {}, when(u.updated_ms))))))));
  const err = banner();
  const username = input('', { required: true, autocomplete: 'off', pattern: '[A-Za-z0-9._@\\-]{1,64}' });
  const password = input('', { type: 'password', autocomplete: 'new-password' });
  const role = roleSelect('viewer');
  const granted = groupBoxes(apps, [], 'new');
  const form = h('form', { class: 'form', 'aria-label': t('users.new'), onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api('POST', '/api/v1/users', { username: username.value, password: password.value, role: role.value, groups: granted.granted() });
      navigate(`/users/${encodeURIComponent(username.value)}`);
    } catch (e2) { showError(form, err, e2); }
  } }, field(t('login.username'), 'username', username), field(t('login.password'), 'password', password, t('account.passwordRule')),
  explained(t('users.role'), 'role', role, 'ROLES'), h('div', { class: 'wide' }, granted, h('span', { class: 'field-error', id: 'err-groups', role: 'alert' })),
  h('div', { class: 'wide' }, err, h('button', { type: 'submit', class: 'primary' }, t('users.create'))));
  main.append(h('h2', {}, t('users.new')), form);
}

export async function userScreen(main, { name }) {
  const username = decodeURIComponent(name);
  const [u, groups] = await Promise.all([api('GET', `/api/v1/users/${encodeURIComponent(username)}`), api('GET', '/api/v1/groups')]);
  main.append(h('h1', {}, t('users.user'), ' ', h('span', { translate: 'no' }, u.username)), h('p', { class: 'muted' }, t('common.created'), ' ', when(u.created_ms), ' · ', t('common.changed'), ' ', when(u.updated_ms)));
  const err = banner();
  const done = h('p', { role: 'status' });
  const role = choice(ROLES, u.role, 'ROLES');
  const enabled = h('input', { type: 'checkbox', checked: u.enabled });
  const password = input('', { type: 'password', autocomplete: 'new-password', placeholder: t('users.unchanged') });
  const granted = groupBoxes(groups.map((g) => g.app), u.groups, 'edit');
  const form = h('form', { class: 'form', 'aria-label': t('users.edit'), onsubmit: async (e) => {
    e.preventDefault();
    const body = { role: role.value, groups: granted.granted(), enabled: enabled.checked };
    if (password.value) body.password = password.value;
    try {
      await api('PUT', `/api/v1/users/${encodeURIComponent(username)}`, body);
      navigate(location.pathname, true);
    } catch (e2) { showError(form, err, e2); }
  } }, explained(t('users.role'), 'role', role, 'ROLES'), field(t('users.enabled'), 'enabled', enabled, t('users.enabledHint')),
  field(t('account.newPassword'), 'password', password, t('users.passwordHint')),
  h('div', { class: 'wide' }, granted, h('span', { class: 'field-error', id: 'err-groups', role: 'alert' })),
  h('div', { class: 'wide' }, err, done, h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, t('common.save')),
    h('button', { type: 'button', class: 'danger', onclick: async () => {
      if (!confirm(t('users.deleteConfirm', { name: username }))) return;
      try { await api('DELETE', `/api/v1/users/${encodeURIComponent(username)}`); navigate('/users'); } catch (e2) { showError(form, err, e2); }
    } }, t('users.delete')))));
  main.append(form, h('p', {}, link(`/audit${query({ user: username })}`, t('users.whatTheyDid'))));
}

export async function audit(main, _, params) {
  main.append(h('h1', {}, t('audit.title')));
  const f = {
    user: params.get('user') || '', action: params.get('action') || '', target: params.get('target') || '',
    group: params.get('group') || '', since_ms: params.get('since_ms') || '', until_ms: params.get('until_ms') || '',
  };
  const user = input(f.user, { autocomplete: 'off' });
  const action = input(f.action, { placeholder: t('audit.actionExample') });
  const target = input(f.target, { placeholder: t('audit.targetExample') });
  const group = input(f.group, {});
  const since = input(toLocalInput(f.since_ms), { type: 'datetime-local' });
  const until = input(toLocalInput(f.until_ms), { type: 'datetime-local' });
  const err = banner();
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    navigate(`/audit${query({ user: user.value.trim(), action: action.value.trim(), target: target.value.trim(), group: group.value.trim(), since_ms: toMs(since.value), until_ms: toMs(until.value) })}`);
  } }, field(t('users.user'), 'user', user), field(t('audit.action'), 'action', action), field(t('audit.target'), 'target', target),
  field(t('common.group'), 'group', group), field(t('common.from'), 'since_ms', since), field(t('common.until'), 'until_ms', until),
  h('button', { type: 'submit', class: 'primary' }, t('common.filter')));
  main.append(form, datePresets(since, until), err);
  let list;
  try {
    list = await api('GET', `/api/v1/audit${query({ ...f, limit: 100 })}`);
  } catch (e) { showError(form, err, e); return; }
  const items = list.items;
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, items.length === 100 ? t('audit.newest100') : t('audit.records', { count: items.length })),
    h('thead', {}, h('tr', {}, ...['audit.when', 'users.user', 'audit.action', 'audit.target', 'common.group', 'audit.detail', 'audit.address'].map((k) => h('th', { scope: 'col' }, t(k))))),
    h('tbody', {}, items.length ? items.map((a) => h('tr', {}, h('td', {}, when(a.at_ms)), h('td', { translate: 'no' }, a.username), h('td', { translate: 'no' }, a.action),
      h('td', { translate: 'no' }, a.target), h('td', { translate: 'no' }, a.group || ''), h('td', {}, auditDetail(a)), h('td', { translate: 'no' }, a.address || ''))) : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, t('audit.none')))))));
}

/** An audit record's detail: a job change as its diff (field: before →
 *  after), any other detail as the API stored it. */
function auditDetail(a) {
  let changes = null;
  if (a.detail && a.target && a.target.startsWith('job:')) {
    try { changes = JSON.parse(a.detail); } catch { changes = null; }
  }
  if (!changes || typeof changes !== 'object' || Array.isArray(changes)) {
    return h('span', { translate: 'no' }, a.detail || '');
  }
  return changeList(changes);
}
