// Executor groups, one group with its executors, and the cluster.

import { api, query, h, link, when, field, showError, banner, mayOperate, isAdmin, navigate } from './ui.js';
import { input, executorTable } from './widgets.js';
import { t } from './i18n.js';

export async function groupsScreen(main) {
  main.append(h('h1', {}, t('groups.title')));
  const [list, executors] = await Promise.all([api('GET', '/api/v1/groups'), api('GET', '/api/v1/executors')]);
  const live = (app) => executors.filter((e) => e.group === app && e.state === 'live').length;
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['groups.app', 'groups.groupTitle', 'groups.online', ''].map((k) => h('th', { scope: 'col' }, k ? t(k) : '')))),
    h('tbody', {}, list.length ? list.map((g) => h('tr', {},
      h('td', { translate: 'no' }, link(`/groups/${encodeURIComponent(g.app)}`, g.app)), h('td', { translate: 'no' }, g.title),
      h('td', {}, String(live(g.app))), h('td', {}, link(`/jobs${query({ group: g.app })}`, t('groups.jobs'))))) : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, t('groups.none')))))));
  main.append(h('h2', {}, t('groups.executors')), executorTable(executors, true));
  if (isAdmin()) {
    const err = banner();
    const app = input('', { required: true, pattern: '[A-Za-z0-9_-]{1,64}' });
    const title = input('', {});
    const form = h('form', { class: 'form', 'aria-label': t('groups.new'), onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('POST', '/api/v1/groups', { app: app.value, title: title.value });
        navigate('/groups', true);
      } catch (e2) { showError(form, err, e2); }
    } }, field(t('groups.appName'), 'app', app, t('groups.appRule')), field(t('groups.groupTitle'), 'title', title),
    h('div', { class: 'wide' }, err, h('button', { type: 'submit', class: 'primary' }, t('groups.create'))));
    main.append(h('h2', {}, t('groups.new')), form);
  }
}

export async function groupScreen(main, { app }, _, ctx) {
  const name = decodeURIComponent(app);
  const g = await api('GET', `/api/v1/groups/${encodeURIComponent(name)}`);
  const access = g.xxl_access || {};
  main.append(h('h1', {}, t('groups.group'), ' ', h('span', { translate: 'no' }, g.app)), h('dl', { class: 'facts' },
    h('dt', {}, t('groups.groupTitle')), h('dd', { translate: 'no' }, g.title || '—'),
    h('dt', {}, t('groups.xxlGateway')), h('dd', { id: 'xxl-gateway' }, g.xxl_gateway ? t('groups.xxlServed') : t('groups.xxlNative')),
    g.xxl_gateway ? [h('dt', {}, t('groups.xxlToken')), h('dd', { id: 'xxl-token' },
      access.token ? [t('groups.xxlTokenSet'), ' ', when(access.changed_ms)] : t('groups.xxlTokenNone'),
      access.previous ? [' · ', t('groups.xxlTokenRotating')] : null)] : null,
    g.xxl_gateway && g.xxl_addresses ? [h('dt', {}, t('groups.xxlAddresses')),
      h('dd', { translate: 'no' }, g.xxl_addresses.join(', '))] : null,
    h('dt', {}, t('common.changed')), h('dd', {}, when(g.updated_ms))),
  h('p', {}, link(`/jobs${query({ group: g.app })}`, t('groups.itsJobs')), ' · ', link(`/logs${query({ group: g.app })}`, t('groups.itsLogs'))));
  if (mayOperate(g.app)) {
    const err = banner();
    const title = input(g.title, {});
    const served = h('input', { type: 'checkbox', checked: !!g.xxl_gateway });
    const done = h('p', { role: 'status' });
    const form = h('form', { class: 'form', 'aria-label': t('groups.edit'), onsubmit: async (e) => {
      e.preventDefault();
      const change = { title: title.value };
      if (isAdmin()) change.xxl_gateway = served.checked;
      try {
        await api('PUT', `/api/v1/groups/${encodeURIComponent(name)}`, change);
        navigate(location.pathname, true);
      } catch (e2) { showError(form, err, e2); }
    } }, field(t('groups.groupTitle'), 'title', title),
    isAdmin() ? field(t('groups.xxlServedByGateway'), 'xxl_gateway', served, t('groups.xxlServedHint')) : null,
    h('div', { class: 'wide' }, err, done,
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, t('common.save')),
        isAdmin() ? h('button', { type: 'button', class: 'danger', onclick: async () => {
          if (!confirm(t('groups.deleteConfirm', { name }))) return;
          try {
            await api('DELETE', `/api/v1/groups/${encodeURIComponent(name)}`);
            navigate('/groups');
          } catch (e2) { showError(form, err, e2); }
        } }, t('groups.delete')) : null)));
    main.append(h('h2', {}, t('groups.edit')), form);
  }
  if (isAdmin() && g.xxl_gateway) main.append(...tokenSection(name, access));
  const box = h('section', { 'aria-labelledby': 'ex' });
  main.append(box);
  const draw = async () => {
    const ex = await api('GET', `/api/v1/executors${query({ group: name })}`);
    box.replaceChildren(h('h2', { id: 'ex' }, t('groups.executors')), executorTable(ex, false));
  };
  await draw();
  ctx.every(3000, draw);
}

// An admin's controls of a served group's XXL-JOB access token: a new one,
// shown once (the one before kept on request), and the end of a rotation.
function tokenSection(name, access) {
  const err = banner();
  const keep = h('input', { type: 'checkbox' });
  const shown = h('p', { role: 'status' });
  const path = `/api/v1/groups/${encodeURIComponent(name)}/xxl-token`;
  const form = h('form', { class: 'form', 'aria-label': t('groups.xxlToken'), onsubmit: async (e) => {
    e.preventDefault();
    if (!confirm(t('groups.xxlTokenConfirm', { name }))) return;
    try {
      const made = await api('POST', path, { keep_previous: keep.checked });
      shown.replaceChildren(t('groups.xxlTokenShownOnce'), ' ', h('code', { id: 'new-xxl-token', translate: 'no' }, made.token));
    } catch (e2) { showError(form, err, e2); }
  } }, access.token ? field(t('groups.xxlKeepPrevious'), 'keep_previous', keep, t('groups.xxlKeepPreviousHint')) : null,
  h('div', { class: 'wide' }, err, shown, h('div', { class: 'actions' },
    h('button', { type: 'submit' }, t('groups.xxlTokenNew')),
    access.previous ? h('button', { type: 'button', onclick: async () => {
      try {
        await api('DELETE', `${path}/previous`);
        navigate(location.pathname, true);
      } catch (e2) { showError(form, err, e2); }
    } }, t('groups.xxlTokenEndRotation')) : null)));
  return [h('h2', {}, t('groups.xxlToken')), form];
}

export async function clusterScreen(main, _, __, ctx) {
  main.append(h('h1', {}, t('cluster.title')));
  const box = h('div', {});
  main.append(box);
  const draw = async () => {
    const c = await api('GET', '/api/v1/cluster');
    box.replaceChildren(h('dl', { class: 'facts' },
      h('dt', {}, t('cluster.leader')), h('dd', { translate: 'no' }, c.leader ? `${c.leader.node}` : t('cluster.noLeader')),
      h('dt', {}, t('cluster.term')), h('dd', {}, c.leader ? String(c.leader.term) : '—'),
      h('dt', {}, t('cluster.nodes')), h('dd', { translate: 'no' }, c.nodes.join(', ')),
      h('dt', {}, t('cluster.answering')), h('dd', { translate: 'no' }, c.node),
      h('dt', {}, t('cluster.lastClaim')), h('dd', {}, when(c.last_claim_ms)),
      h('dt', {}, t('cluster.lateness')), h('dd', {}, t('cluster.latenessValue', c.firing.publish_lateness_ms)),
      h('dt', {}, t('cluster.fired')), h('dd', {}, String(c.firing.fired))),
    h('h2', {}, t('cluster.rings')),
    h('table', {}, h('tbody', {}, ...Object.entries(c.ring_sizes).map(([n, v]) => h('tr', {}, h('th', { scope: 'row', translate: 'no' }, n), h('td', {}, String(v)))))),
    h('h2', {}, t('cluster.dueSets')),
    h('p', {}, c.due_sizes.join(' · ')));
  };
  await draw();
  ctx.every(3000, draw);
}
