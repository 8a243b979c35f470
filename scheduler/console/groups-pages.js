// Executor groups, one group with its executors, and the cluster.

import { api, query, h, link, when, field, showError, banner, mayOperate, isAdmin, navigate } from './ui.js';
import { input, executorTable } from './widgets.js';

export async function groupsScreen(main) {
  main.append(h('h1', {}, 'Executor groups'));
  const [list, executors] = await Promise.all([api('GET', '/api/v1/groups'), api('GET', '/api/v1/executors')]);
  const live = (app) => executors.filter((e) => e.group === app && e.state === 'live').length;
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['App', 'Title', 'Executors online', ''].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, list.length ? list.map((g) => h('tr', {},
      h('td', {}, link(`/groups/${encodeURIComponent(g.app)}`, g.app)), h('td', {}, g.title),
      h('td', {}, String(live(g.app))), h('td', {}, link(`/jobs${query({ group: g.app })}`, 'jobs')))) : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No group yet.'))))));
  main.append(h('h2', {}, 'Executors'), executorTable(executors, true));
  if (isAdmin()) {
    const err = banner();
    const app = input('', { required: true, pattern: '[A-Za-z0-9_-]{1,64}' });
    const title = input('', {});
    const form = h('form', { class: 'form', 'aria-label': 'New group', onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('POST', '/api/v1/groups', { app: app.value, title: title.value });
        navigate('/groups', true);
      } catch (e2) { showError(form, err, e2); }
    } }, field('App name', 'app', app, 'letters, digits, - and _'), field('Title', 'title', title),
    h('div', { class: 'wide' }, err, h('button', { type: 'submit', class: 'primary' }, 'Create group')));
    main.append(h('h2', {}, 'New group'), form);
  }
}

export async function groupScreen(main, { app }, _, ctx) {
  const name = decodeURIComponent(app);
  const g = await api('GET', `/api/v1/groups/${encodeURIComponent(name)}`);
  main.append(h('h1', {}, `Group ${g.app}`), h('dl', { class: 'facts' },
    h('dt', {}, 'Title'), h('dd', {}, g.title || '—'),
    h('dt', {}, 'Changed'), h('dd', {}, when(g.updated_ms))),
  h('p', {}, link(`/jobs${query({ group: g.app })}`, 'Its jobs'), ' · ', link(`/logs${query({ group: g.app })}`, 'its logs')));
  if (mayOperate(g.app)) {
    const err = banner();
    const title = input(g.title, {});
    const done = h('p', { role: 'status' });
    const form = h('form', { class: 'form', 'aria-label': 'Edit group', onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('PUT', `/api/v1/groups/${encodeURIComponent(name)}`, { title: title.value });
        navigate(location.pathname, true);
      } catch (e2) { showError(form, err, e2); }
    } }, field('Title', 'title', title), h('div', { class: 'wide' }, err, done,
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save'),
        isAdmin() ? h('button', { type: 'button', class: 'danger', onclick: async () => {
          if (!confirm(`Delete group ${name}? Only a group without jobs can go.`)) return;
          try {
            await api('DELETE', `/api/v1/groups/${encodeURIComponent(name)}`);
            navigate('/groups');
          } catch (e2) { showError(form, err, e2); }
        } }, 'Delete group') : null)));
    main.append(h('h2', {}, 'Edit'), form);
  }
  const box = h('section', { 'aria-labelledby': 'ex' });
  main.append(box);
  const draw = async () => {
    const ex = await api('GET', `/api/v1/executors${query({ group: name })}`);
    box.replaceChildren(h('h2', { id: 'ex' }, 'Executors'), executorTable(ex, false));
  };
  await draw();
  ctx.every(3000, draw);
}

export async function clusterScreen(main, _, __, ctx) {
  main.append(h('h1', {}, 'Cluster'));
  const box = h('div', {});
  main.append(box);
  const draw = async () => {
    const c = await api('GET', '/api/v1/cluster');
    box.replaceChildren(h('dl', { class: 'facts' },
      h('dt', {}, 'Leader'), h('dd', {}, c.leader ? `${c.leader.node}` : 'none'),
      h('dt', {}, 'Term'), h('dd', {}, c.leader ? String(c.leader.term) : '—'),
      h('dt', {}, 'Nodes'), h('dd', {}, c.nodes.join(', ')),
      h('dt', {}, 'Answering node'), h('dd', {}, c.node),
      h('dt', {}, 'Last claim'), h('dd', {}, when(c.last_claim_ms)),
      h('dt', {}, 'Publish lateness (this node)'), h('dd', {}, `p50 ${c.firing.publish_lateness_ms.p50} ms, p99 ${c.firing.publish_lateness_ms.p99} ms, max ${c.firing.publish_lateness_ms.max} ms`),
      h('dt', {}, 'Fired (this node)'), h('dd', {}, String(c.firing.fired))),
    h('h2', {}, 'Rings (fires assigned per node)'),
    h('table', {}, h('tbody', {}, ...Object.entries(c.ring_sizes).map(([n, v]) => h('tr', {}, h('th', { scope: 'row' }, n), h('td', {}, String(v)))))),
    h('h2', {}, 'Due sets per partition'),
    h('p', {}, c.due_sizes.join(' · ')));
  };
  await draw();
  ctx.every(3000, draw);
}
