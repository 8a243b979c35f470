// The dashboard, the trigger logs and one trigger's log.

import { api, query, h, link, when, field, showError, banner, mayOperate, navigate } from './ui.js';
import { select, input, statusOf, statusCell, toMs, toLocalInput } from './widgets.js';

function chart(rows) {
  const w = 640; const hgt = 200; const pad = 28;
  const max = Math.max(1, ...rows.map((r) => r.success_count + r.fail_count + r.running_count));
  const bw = (w - pad * 2) / Math.max(1, rows.length);
  const y = (v) => hgt - pad - (v / max) * (hgt - pad * 2);
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${hgt}`);
  svg.setAttribute('class', 'chart');
  svg.setAttribute('role', 'img');
  const total = rows.reduce((a, r) => a + r.success_count + r.fail_count, 0);
  const ok = rows.reduce((a, r) => a + r.success_count, 0);
  svg.setAttribute('aria-label', `Fires per day: ${total} finished, ${ok} succeeded`);
  const add = (tag, attrs, text) => {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    svg.append(el);
    return el;
  };
  add('line', { x1: pad, y1: hgt - pad, x2: w - pad, y2: hgt - pad, stroke: '#aab4be' });
  add('text', { x: 2, y: pad }, String(max));
  rows.forEach((r, i) => {
    const x = pad + i * bw + 2;
    let base = 0;
    for (const [v, color] of [[r.success_count, '#1a7f37'], [r.fail_count, '#c42b1c'], [r.running_count, '#9a6700']]) {
      if (v > 0) {
        const rect = add('rect', { x, y: y(base + v), width: Math.max(1, bw - 4), height: y(base) - y(base + v), fill: color });
        const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
        title.textContent = `${r.day}: ${r.success_count} ok, ${r.fail_count} failed, ${r.running_count} running`;
        rect.append(title);
      }
      base += v;
    }
    add('text', { x: x, y: hgt - 8 }, String(r.day).slice(5));
  });
  return svg;
}

export async function dashboard(main, _, __, ctx) {
  main.append(h('h1', {}, 'Dashboard'));
  const cards = h('div', { class: 'cards' });
  const report = h('section', { 'aria-labelledby': 'rep' });
  const clusterBox = h('section', { 'aria-labelledby': 'cl' });
  main.append(cards, report, clusterBox);
  let last = null;
  let rep = null;
  let reportAt = 0;
  // The counts every 3 s; the report (MySQL, today and yesterday
  // recounted) every 30 s.
  const draw = async () => {
    const now = Date.now();
    const wantReport = !rep || now - reportAt >= 30_000;
    const [jobs, running, groups, executors, cluster, fresh] = await Promise.all([
      api('GET', '/api/v1/jobs?limit=0'),
      api('GET', '/api/v1/logs?status=running&limit=1000'),
      api('GET', '/api/v1/groups'),
      api('GET', '/api/v1/executors'),
      api('GET', '/api/v1/cluster'),
      wantReport ? api('GET', '/api/v1/reports?days=7') : Promise.resolve(null),
    ]);
    if (fresh) { rep = fresh; reportAt = now; }
    let rate = '—';
    if (last && now > last.at) rate = ((cluster.firing.fired - last.fired) * 1000 / (now - last.at)).toFixed(1);
    last = { at: now, fired: cluster.firing.fired };
    const rows = rep.items || [];
    const done = rows.reduce((a, r) => a + r.success_count + r.fail_count, 0);
    const ok = rows.reduce((a, r) => a + r.success_count, 0);
    const card = (label, value) => h('div', { class: 'card' }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
    cards.replaceChildren(
      card('Jobs', `${jobs.total}${jobs.total_exact ? '' : '+'}`),
      card('Running triggers', `${running.items.length}${running.next ? '+' : ''}`),
      card('Groups', groups.length),
      card('Executors online', executors.filter((e) => e.state === 'live').length),
      card('Success rate, 7 days', done ? `${(100 * ok / done).toFixed(1)} %` : '—'),
      card('Fires per second (this node)', rate),
      card('Publish lateness p99 (this node)', `${cluster.firing.publish_lateness_ms.p99} ms`),
    );
    if (fresh) {
      report.replaceChildren(
        h('h2', { id: 'rep' }, `Fires per day (${rep.zone})`),
        h('div', { class: 'legend' },
          h('span', { class: 'ok' }, '■ success'), h('span', { class: 'bad' }, '■ failure'), h('span', { class: 'run' }, '■ running')),
        chart(rows));
    }
    const leader = cluster.leader;
    clusterBox.replaceChildren(h('h2', { id: 'cl' }, 'Cluster'),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Leader'), h('dd', {}, leader ? `${leader.node} (term ${leader.term})` : 'none'),
        h('dt', {}, 'Nodes'), h('dd', {}, cluster.nodes.join(', ')),
        h('dt', {}, 'This node'), h('dd', {}, cluster.node)));
  };
  await draw();
  ctx.every(3000, draw);
}

// ---- jobs --------------------------------------------------------------

export async function logs(main, _, params) {
  const groups = await api('GET', '/api/v1/groups');
  const f = {
    group: params.get('group') || '', job_id: params.get('job_id') || '', status: params.get('status') || '',
    from_ms: params.get('from_ms') || '', until_ms: params.get('until_ms') || '', before: params.get('before') || '',
  };
  const group = select([['', 'all groups'], ...groups.map((g) => g.app)], f.group);
  const job = input(f.job_id, { inputmode: 'numeric', placeholder: 'any job' });
  const status = select([['', 'any status'], 'running', 'success', 'failure'], f.status);
  const from = input(toLocalInput(f.from_ms), { type: 'datetime-local' });
  const until = input(toLocalInput(f.until_ms), { type: 'datetime-local' });
  const go = (before) => navigate(`/logs${query({ group: group.value, job_id: job.value.trim(), status: status.value, from_ms: toMs(from.value), until_ms: toMs(until.value), before })}`);
  const err = banner();
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); go(); } },
    field('Group', 'group', group), field('Job id', 'job_id', job), field('Status', 'status', status),
    field('From', 'from_ms', from), field('Until', 'until_ms', until),
    h('button', { type: 'submit', class: 'primary' }, 'Filter'));
  main.append(h('h1', {}, 'Logs'), form, err);
  let page;
  try {
    page = await api('GET', `/api/v1/logs${query({ ...f, limit: 50 })}`);
  } catch (e) { showError(form, err, e); return; }
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['Trigger', 'Job', 'Group', 'Fired', 'Executor', 'Status', 'Result'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, page.items.length ? page.items.map((r) => h('tr', {},
      h('td', {}, link(`/logs/${encodeURIComponent(r.trigger_id)}`, r.trigger_id)),
      h('td', {}, link(`/jobs/${r.job_id}`, String(r.job_id))),
      h('td', {}, r.group || ''),
      h('td', {}, when(r.fire_ms)),
      h('td', {}, r.executor_id || ''),
      h('td', {}, statusCell(r)),
      h('td', {}, r.handle_msg || r.trigger_msg || ''))) : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No trigger matches.'))))));
  main.append(h('div', { class: 'pager' },
    f.before ? h('button', { type: 'button', onclick: () => history.back() }, 'Newer') : null,
    h('button', { type: 'button', disabled: !page.next, onclick: () => go(page.next) }, 'Older')));
}

/** XXL-JOB's alarm status of a trigger. */
const ALARM = { 1: 'not needed', 2: 'sent', 3: 'sending failed', 4: 'queued', 5: 'folded into another alarm' };

export async function logDetail(main, { trigger }, _, ctx) {
  const id = decodeURIComponent(trigger);
  main.append(h('h1', {}, `Trigger ${id}`));
  const facts = h('dl', { class: 'facts' });
  const lines = h('pre', { class: 'log', 'aria-live': 'polite', 'aria-label': 'Log lines' });
  const state = h('p', { class: 'muted', id: 'follow-state' });
  const err = banner();
  const kill = h('button', { type: 'button', class: 'danger', hidden: true, onclick: async () => {
    try {
      await api('POST', `/api/v1/logs/${encodeURIComponent(id)}/kill`);
      kill.disabled = true;
      state.textContent = 'Kill sent; waiting for the executor’s result…';
    } catch (e) { err.textContent = e.message; err.hidden = false; }
  } }, 'Kill');
  main.append(h('div', { class: 'actions' }, kill), err, facts, h('h2', {}, 'Log'), state, lines);
  // The highest line shown: each poll asks only for the lines after it,
  // and polls never overlap (ctx.every), so no line is drawn twice.
  let lastSeq = null;
  let polledAfterEnd = 0;
  const draw = async () => {
    let t;
    try {
      t = await api('GET', `/api/v1/logs/${encodeURIComponent(id)}${query({ after_seq: lastSeq })}`);
    } catch (e) {
      if (e.status === 404) { state.textContent = 'Waiting for the trigger’s first record…'; return true; }
      throw e;
    }
    const r = t.log || {};
    const [st] = r.trigger_id ? statusOf(r) : ['running'];
    facts.replaceChildren(
      h('dt', {}, 'Job'), h('dd', {}, r.job_id !== undefined ? link(`/jobs/${r.job_id}`, String(r.job_id)) : '—'),
      h('dt', {}, 'Group'), h('dd', {}, r.group || '—'),
      h('dt', {}, 'Status'), h('dd', {}, r.trigger_id ? statusCell(r) : 'running'),
      h('dt', {}, 'Type'), h('dd', {}, r.trigger_type || '—'),
      h('dt', {}, 'Executor'), h('dd', {}, r.executor_id || '—'),
      h('dt', {}, 'Params'), h('dd', {}, r.params || '—'),
      h('dt', {}, 'Fired'), h('dd', {}, when(r.fire_ms)),
      h('dt', {}, 'Sent'), h('dd', {}, when(r.trigger_ms), r.trigger_msg ? ` ${r.trigger_msg}` : ''),
      h('dt', {}, 'Started'), h('dd', {}, when(r.handle_start_ms)),
      h('dt', {}, 'Ended'), h('dd', {}, when(r.handle_ms)),
      h('dt', {}, 'Result'), h('dd', {}, r.handle_code !== null && r.handle_code !== undefined ? `${r.handle_code} ${r.handle_msg || ''}` : '—'),
      h('dt', {}, 'Alarm'), h('dd', {}, ALARM[r.alarm_status] || '—', r.alarm_msg ? `: ${r.alarm_msg}` : ''));
    for (const l of t.lines) {
      if (lastSeq !== null && l.seq <= lastSeq) continue;
      lines.append(`${l.line}\n`);
      lastSeq = l.seq;
    }
    const running = st === 'running';
    kill.hidden = !running || !mayOperate(r.group);
    state.textContent = running ? 'Running: new lines appear as the executor ships them.' : 'Ended.';
    // After the result, two more polls pick up lines stored after it.
    if (!running) polledAfterEnd += 1;
    return running || polledAfterEnd < 3;
  };
  if (await draw()) ctx.every(1000, draw);
}

// ---- groups, cluster, account, users, audit ------------------------------
