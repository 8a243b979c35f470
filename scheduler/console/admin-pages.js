// Sign-in, one's account, users (admins) and the audit log.

import { session, api, query, h, link, when, field, showError, banner, navigate, safeNext } from './ui.js';
import { ROLES } from './choices.js';
import { choice, explained, input, toMs, toLocalInput, groupBoxes } from './widgets.js';

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
        navigate(safeNext(params.get('next')), true);
      } catch (e2) {
        showError(form, err, e2);
      }
    },
  },
  h('h1', {}, 'Sign in to rondo'),
  field('Username', 'username', user),
  field('Password', 'password', pass),
  err,
  h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
  main.append(h('div', { class: 'login' }, form));
  user.focus();
}

// ---- dashboard ---------------------------------------------------------

export async function account(main) {
  const me = session.me;
  main.append(h('h1', {}, 'Account'), h('p', {}, `${me.username}, ${me.role}${me.groups.length ? ` of ${me.groups.join(', ')}` : ''}`));
  const err = banner();
  const current = input('', { type: 'password', autocomplete: 'current-password' });
  const next = input('', { type: 'password', autocomplete: 'new-password' });
  const done = h('p', { role: 'status' });
  const form = h('form', { class: 'form', 'aria-label': 'Change password', onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api('PUT', '/api/v1/auth/password', { current_password: current.value, new_password: next.value });
      current.value = ''; next.value = '';
      done.textContent = 'Password changed; your other sessions have ended.';
    } catch (e2) { showError(form, err, e2); }
  } }, field('Current password', 'current_password', current), field('New password', 'new_password', next, '12 characters or more'),
  h('div', { class: 'wide' }, err, done, h('button', { type: 'submit', class: 'primary' }, 'Change password')));
  main.append(h('h2', {}, 'Password'), form);

  // The caller's own tokens (an admin's list would hold everyone's).
  const tokens = await api('GET', `/api/v1/tokens${query({ user: me.username })}`);
  const now = Date.now();
  const active = tokens.items.filter((t) => !t.revoked_ms && !(t.expires_ms && t.expires_ms <= now));
  const terr = banner();
  const name = input('', { required: true, maxlength: 64 });
  const days = input(90, { type: 'number', min: 1, max: 365 });
  const readOnly = h('input', { type: 'checkbox' });
  const shownToken = h('p', { role: 'status' });
  const tform = h('form', { class: 'form', 'aria-label': 'New token', onsubmit: async (e) => {
    e.preventDefault();
    try {
      const t = await api('POST', '/api/v1/tokens', { name: name.value, expires_in_days: Number(days.value), read_only: readOnly.checked });
      shownToken.replaceChildren('New token, shown this once: ', h('code', { id: 'new-token' }, t.token));
      tbody.prepend(tokenRow(t));
      name.value = '';
    } catch (e2) { showError(tform, terr, e2); }
  } }, field('Token name', 'name', name), field('Expires in (days)', 'expires_in_days', days),
  field('Read only', 'read_only', readOnly), h('div', { class: 'wide' }, terr, shownToken, h('button', { type: 'submit' }, 'Create token')));
  const tokenRow = (t) => {
    const row = h('tr', {}, h('td', {}, t.name), h('td', {}, h('code', {}, t.prefix)), h('td', {}, t.read_only ? 'read only' : 'full'),
      h('td', {}, when(t.created_ms)), h('td', {}, when(t.expires_ms)), h('td', {}, when(t.last_used_ms)),
      h('td', {}, h('button', { type: 'button', 'aria-label': `Revoke token ${t.name}`, onclick: async () => {
        if (!confirm(`Revoke token ${t.name}? Clients using it stop working.`)) return;
        try { await api('DELETE', `/api/v1/tokens/${t.id}`); row.remove(); } catch (e2) { terr.textContent = e2.message; terr.hidden = false; }
      } }, 'Revoke')));
    return row;
  };
  const tbody = h('tbody', {}, ...active.map(tokenRow));
  main.append(h('h2', {}, 'API tokens'), h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['Name', 'Prefix', 'Rights', 'Created', 'Expires', 'Last used', ''].map((t) => h('th', { scope: 'col' }, t)))),
    tbody)), tform);
}

export async function users(main) {
  main.append(h('h1', {}, 'Users'));
  const [list, groups] = await Promise.all([api('GET', '/api/v1/users'), api('GET', '/api/v1/groups')]);
  const apps = groups.map((g) => g.app);
  const roleSelect = (value) => choice(ROLES, value);
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['User', 'Role', 'Groups', 'Enabled', 'Changed'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, ...list.items.map((u) => h('tr', {},
      h('td', {}, link(`/users/${encodeURIComponent(u.username)}`, u.username)), h('td', {}, u.role),
      h('td', {}, u.role === 'admin' ? 'all' : (u.groups.join(', ') || '—')),
      h('td', {}, u.enabled ? 'yes' : h('span', { class: 'bad' }, 'disabled')), h('td', {}, when(u.updated_ms))))))));
  const err = banner();
  const username = input('', { required: true, autocomplete: 'off', pattern: '[A-Za-z0-9._@\\-]{1,64}' });
  const password = input('', { type: 'password', autocomplete: 'new-password' });
  const role = roleSelect('viewer');
  const granted = groupBoxes(apps, [], 'new');
  const form = h('form', { class: 'form', 'aria-label': 'New user', onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api('POST', '/api/v1/users', { username: username.value, password: password.value, role: role.value, groups: granted.granted() });
      navigate(`/users/${encodeURIComponent(username.value)}`);
    } catch (e2) { showError(form, err, e2); }
  } }, field('Username', 'username', username), field('Password', 'password', password, '12 characters or more'),
  explained('Role', 'role', role, ROLES), h('div', { class: 'wide' }, granted, h('span', { class: 'field-error', id: 'err-groups', role: 'alert' })),
  h('div', { class: 'wide' }, err, h('button', { type: 'submit', class: 'primary' }, 'Create user')));
  main.append(h('h2', {}, 'New user'), form);
}

export async function userScreen(main, { name }) {
  const username = decodeURIComponent(name);
  const [u, groups] = await Promise.all([api('GET', `/api/v1/users/${encodeURIComponent(username)}`), api('GET', '/api/v1/groups')]);
  main.append(h('h1', {}, `User ${u.username}`), h('p', { class: 'muted' }, 'Created ', when(u.created_ms), ' · changed ', when(u.updated_ms)));
  const err = banner();
  const done = h('p', { role: 'status' });
  const role = choice(ROLES, u.role);
  const enabled = h('input', { type: 'checkbox', checked: u.enabled });
  const password = input('', { type: 'password', autocomplete: 'new-password', placeholder: 'unchanged' });
  const granted = groupBoxes(groups.map((g) => g.app), u.groups, 'edit');
  const form = h('form', { class: 'form', 'aria-label': 'Edit user', onsubmit: async (e) => {
    e.preventDefault();
    const body = { role: role.value, groups: granted.granted(), enabled: enabled.checked };
    if (password.value) body.password = password.value;
    try {
      await api('PUT', `/api/v1/users/${encodeURIComponent(username)}`, body);
      navigate(location.pathname, true);
    } catch (e2) { showError(form, err, e2); }
  } }, explained('Role', 'role', role, ROLES), field('Enabled', 'enabled', enabled, 'a disabled user cannot sign in; its tokens stop'),
  field('New password', 'password', password, 'ends the user’s sessions'),
  h('div', { class: 'wide' }, granted, h('span', { class: 'field-error', id: 'err-groups', role: 'alert' })),
  h('div', { class: 'wide' }, err, done, h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, 'Save'),
    h('button', { type: 'button', class: 'danger', onclick: async () => {
      if (!confirm(`Delete user ${username}? Their tokens are revoked.`)) return;
      try { await api('DELETE', `/api/v1/users/${encodeURIComponent(username)}`); navigate('/users'); } catch (e2) { showError(form, err, e2); }
    } }, 'Delete user'))));
  main.append(form, h('p', {}, link(`/audit${query({ user: username })}`, 'What this user did')));
}

export async function audit(main, _, params) {
  main.append(h('h1', {}, 'Audit log'));
  const f = {
    user: params.get('user') || '', action: params.get('action') || '', target: params.get('target') || '',
    group: params.get('group') || '', since_ms: params.get('since_ms') || '', until_ms: params.get('until_ms') || '',
  };
  const user = input(f.user, { autocomplete: 'off' });
  const action = input(f.action, { placeholder: 'e.g. job.update' });
  const target = input(f.target, { placeholder: 'e.g. job:7' });
  const group = input(f.group, {});
  const since = input(toLocalInput(f.since_ms), { type: 'datetime-local' });
  const until = input(toLocalInput(f.until_ms), { type: 'datetime-local' });
  const err = banner();
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    navigate(`/audit${query({ user: user.value.trim(), action: action.value.trim(), target: target.value.trim(), group: group.value.trim(), since_ms: toMs(since.value), until_ms: toMs(until.value) })}`);
  } }, field('User', 'user', user), field('Action', 'action', action), field('Target', 'target', target),
  field('Group', 'group', group), field('From', 'since_ms', since), field('Until', 'until_ms', until),
  h('button', { type: 'submit', class: 'primary' }, 'Filter'));
  main.append(form, err);
  let list;
  try {
    list = await api('GET', `/api/v1/audit${query({ ...f, limit: 100 })}`);
  } catch (e) { showError(form, err, e); return; }
  const items = list.items;
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, items.length === 100 ? 'The newest 100: narrow the time range to see older ones.' : `${items.length} records`),
    h('thead', {}, h('tr', {}, ...['When', 'User', 'Action', 'Target', 'Group', 'Detail', 'From'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, items.length ? items.map((a) => h('tr', {}, h('td', {}, when(a.at_ms)), h('td', {}, a.username), h('td', {}, a.action),
      h('td', {}, a.target), h('td', {}, a.group || ''), h('td', {}, a.detail || ''), h('td', {}, a.address || ''))) : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No record matches.'))))));
}
