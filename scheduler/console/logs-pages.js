// The dashboard, the trigger logs (with kill and clean) and one trigger's
// log.

import { api, query, h, link, when, field, showError, showBanner, banner, mayOperate, isAdmin, navigate } from './ui.js';
import { select, input, statusOf, statusCell, toMs, toLocalInput, datePresets } from './widgets.js';
import { t } from './i18n.js';

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
  svg.setAttribute('aria-label', t('dashboard.chartLabel', { total, ok }));
  const add = (tag, attrs, text) => {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    svg.append(el);
    return el;
  };
  add('line', { x1: pad, y1: hgt - pad, x2: w - pad, y2: hgt - pad, stroke: '#aab4be' });
  add('text', { x: 2, y: pad }, String(max));
  // A label under every bar while they fit, else under every n-th.
  const every = Math.max(1, Math.ceil(rows.length / 16));
  rows.forEach((r, i) => {
    const x = pad + i * bw + 2;
    let base = 0;
    for (const [v, color] of [[r.success_count, '#1a7f37'], [r.fail_count, '#c42b1c'], [r.running_count, '#9a6700']]) {
      if (v > 0) {
        const rect = add('rect', { x, y: y(base + v), width: Math.max(1, bw - 4), height: y(base) - y(base + v), fill: color });
        const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
        title.textContent = t('dashboard.barTitle', { day: r.day, ok: r.success_count, failed: r.fail_count, running: r.running_count });
        rect.append(title);
      }
      base += v;
    }
    if (i % every === 0) add('text', { x, y: hgt - 8 }, String(r.day).slice(5));
  });
  return svg;
}

/** The day `back` days before today, as YYYY-MM-DD, in `zone` (the
 *  report's: the API refuses a day after its today), else in the
 *  browser's calendar. */
function dayIn(zone, back = 0) {
  const now = new Date();
  let parts = [now.getFullYear(), now.getMonth() + 1, now.getDate()];
  if (zone) {
    try {
      const p = Object.fromEntries(new Intl.DateTimeFormat('en-US', { timeZone: zone, year: 'numeric', month: 'numeric', day: 'numeric' })
        .formatToParts(now).map(({ type, value }) => [type, Number(value)]));
      parts = [p.year, p.month, p.day];
    } catch { /* a zone the browser does not know: its own calendar */ }
  }
  const d = new Date(Date.UTC(parts[0], parts[1] - 1, parts[2] - back));
  return d.toISOString().slice(0, 10);
}

export async function dashboard(main, _, params, ctx) {
  main.append(h('h1', {}, t('dashboard.title')));
  const cards = h('div', { class: 'cards' });
  let last = null;
  let rep = null;
  let reportAt = 0;
  // The report's range: the URL's, else the last 7 days as the API counts
  // them (in the report's zone, which may be ahead of or behind the
  // browser's).
  const range = params.get('from') ? { from: params.get('from'), to: params.get('to') || undefined } : { days: 7 };
  const from = input(params.get('from') || '', { type: 'date' });
  const to = input(params.get('to') || '', { type: 'date' });
  const rangeErr = banner();
  const rangeForm = h('form', { class: 'toolbar', 'aria-label': t('dashboard.range'), onsubmit: (e) => {
    e.preventDefault();
    navigate(`/${query({ from: from.value, to: to.value })}`);
  } }, field(t('common.from'), 'from', from), field(t('common.until'), 'to', to),
  h('button', { type: 'submit', class: 'primary' }, t('dashboard.show')),
  ...[[7, 'dashboard.last7'], [30, 'dashboard.last30'], [90, 'dashboard.last90']].map(([n, key]) => h('button', {
    type: 'button', dataset: { days: n }, onclick: () => {
      const zone = rep ? rep.zone : undefined;
      navigate(`/${query({ from: dayIn(zone, n - 1), to: dayIn(zone) })}`);
    },
  }, t(key))));
  const totals = h('div', { class: 'cards', id: 'report-totals' });
  const report = h('section', { 'aria-labelledby': 'rep' });
  const clusterBox = h('section', { 'aria-labelledby': 'cl' });
  main.append(cards, h('h2', { id: 'rep' }, t('dashboard.report')), rangeForm, rangeErr, totals, report, clusterBox);
  const card = (label, value, id) => h('div', { class: 'card', id }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
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
      wantReport ? api('GET', `/api/v1/reports${query(range)}`).catch((e) => { showBanner(rangeErr, e); return null; }) : Promise.resolve(null),
    ]);
    if (fresh) {
      rep = fresh; reportAt = now; rangeErr.hidden = true;
      // The range shown is the report's, its days in the report's zone.
      const days = rep.items || [];
      if (!from.value && days.length) from.value = days[0].day;
      if (!to.value && days.length) to.value = days[days.length - 1].day;
      from.max = dayIn(rep.zone);
      to.max = from.max;
    }
    let rate = '—';
    if (last && now > last.at) rate = ((cluster.firing.fired - last.fired) * 1000 / (now - last.at)).toFixed(1);
    last = { at: now, fired: cluster.firing.fired };
    cards.replaceChildren(
      card(t('dashboard.jobs'), `${jobs.total}${jobs.total_exact ? '' : '+'}`),
      card(t('dashboard.running'), `${running.items.length}${running.next ? '+' : ''}`),
      card(t('dashboard.groups'), groups.length),
      card(t('dashboard.executorsOnline'), executors.filter((e) => e.state === 'live').length),
      card(t('dashboard.rate'), rate),
      card(t('dashboard.lateness'), t('unit.ms', { n: cluster.firing.publish_lateness_ms.p99 })),
    );
    if (fresh) {
      const sum = rep.total || { success_count: 0, fail_count: 0, running_count: 0 };
      const done = sum.success_count + sum.fail_count;
      totals.replaceChildren(
        card(t('status.success'), String(sum.success_count), 'total-success'),
        card(t('status.failure'), String(sum.fail_count), 'total-failure'),
        card(t('status.running'), String(sum.running_count), 'total-running'),
        card(t('dashboard.successRate'), done ? `${(100 * sum.success_count / done).toFixed(1)} %` : '—', 'total-rate'));
      const rows = rep.items || [];
      report.replaceChildren(
        h('p', { class: 'muted' }, t('dashboard.zone'), ' ', h('span', { translate: 'no' }, rep.zone)),
        h('div', { class: 'legend' },
          h('span', { class: 'ok' }, `■ ${t('status.success')}`), h('span', { class: 'bad' }, `■ ${t('status.failure')}`), h('span', { class: 'run' }, `■ ${t('status.running')}`)),
        chart(rows),
        h('div', { class: 'table-wrap' }, h('table', { id: 'report-days' },
          h('thead', {}, h('tr', {}, ...['dashboard.day', 'status.success', 'status.failure', 'status.running'].map((k) => h('th', { scope: 'col' }, t(k))))),
          h('tbody', {}, ...rows.slice().reverse().map((r) => h('tr', { dataset: { day: r.day } },
            h('td', {}, r.day), h('td', {}, String(r.success_count)), h('td', {}, String(r.fail_count)), h('td', {}, String(r.running_count))))))));
    }
    const leader = cluster.leader;
    clusterBox.replaceChildren(h('h2', { id: 'cl' }, t('cluster.title')),
      h('dl', { class: 'facts' },
        h('dt', {}, t('cluster.leader')), h('dd', {}, leader ? [h('span', { translate: 'no' }, leader.node), ` (${t('cluster.term')} ${leader.term})`] : t('cluster.noLeader')),
        h('dt', {}, t('cluster.nodes')), h('dd', { translate: 'no' }, cluster.nodes.join(', ')),
        h('dt', {}, t('cluster.answering')), h('dd', { translate: 'no' }, cluster.node)));
  };
  await draw();
  ctx.every(3000, draw);
}

export async function logs(main, _, params) {
  const groups = await api('GET', '/api/v1/groups');
  const f = {
    group: params.get('group') || '', job_id: params.get('job_id') || '', status: params.get('status') || '',
    from_ms: params.get('from_ms') || '', until_ms: params.get('until_ms') || '', before: params.get('before') || '',
  };
  // One job's logs show its times in its zone.
  const job = f.job_id ? await api('GET', `/api/v1/jobs/${encodeURIComponent(f.job_id)}`).catch(() => null) : null;
  const zone = job ? job.zone : undefined;
  const group = select([['', t('filter.allGroups')], ...groups.map((g) => g.app)], f.group);
  const jobInput = input(f.job_id, { inputmode: 'numeric', placeholder: t('filter.anyJob') });
  const status = select([['', t('filter.anyStatus')], ...['running', 'success', 'failure'].map((s) => [s, t(`status.${s}`)])], f.status);
  const from = input(toLocalInput(f.from_ms), { type: 'datetime-local' });
  const until = input(toLocalInput(f.until_ms), { type: 'datetime-local' });
  const go = (before) => navigate(`/logs${query({ group: group.value, job_id: jobInput.value.trim(), status: status.value, from_ms: toMs(from.value), until_ms: toMs(until.value), before })}`);
  const err = banner();
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); go(); } },
    field(t('common.group'), 'group', group), field(t('logs.jobId'), 'job_id', jobInput), field(t('logs.status'), 'status', status),
    field(t('common.from'), 'from_ms', from), field(t('common.until'), 'until_ms', until),
    h('button', { type: 'submit', class: 'primary' }, t('common.filter')));
  main.append(h('h1', {}, t('logs.title')), form, datePresets(from, until), err);
  // Who may clean (as the API decides): a job's logs, its group's
  // operators (a deleted job's: admins); a group's, its operators; every
  // group's, admins.
  const mayClean = f.job_id ? (job ? mayOperate(job.group) : isAdmin()) : f.group ? mayOperate(f.group) : isAdmin();
  if (mayClean) main.append(cleanBox(f, job));
  let page;
  try {
    page = await api('GET', `/api/v1/logs${query({ ...f, limit: 50 })}`);
  } catch (e) { showError(form, err, e); return; }
  const rowErr = banner();
  const killButton = (r) => {
    if (statusOf(r)[0] !== 'running' || !mayOperate(r.group)) return null;
    const b = h('button', { type: 'button', class: 'danger small', 'aria-label': t('logs.killTrigger', { id: r.trigger_id }), onclick: async () => {
      if (!confirm(t('logs.killConfirm', { id: r.trigger_id }))) return;
      try {
        await api('POST', `/api/v1/logs/${encodeURIComponent(r.trigger_id)}/kill`);
        b.disabled = true;
        b.textContent = t('logs.killSent');
      } catch (e) { showBanner(rowErr, e); }
    } }, t('logs.kill'));
    return b;
  };
  main.append(rowErr, h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...['logs.trigger', 'logs.job', 'common.group', 'logs.fired', 'logs.executor', 'logs.status', 'logs.result', ''].map((k) => h('th', { scope: 'col' }, k ? t(k) : '')))),
    h('tbody', {}, page.items.length ? page.items.map((r) => h('tr', { dataset: { trigger: r.trigger_id } },
      h('td', { translate: 'no' }, link(`/logs/${encodeURIComponent(r.trigger_id)}`, r.trigger_id)),
      h('td', {}, link(`/jobs/${r.job_id}`, String(r.job_id))),
      h('td', { translate: 'no' }, r.group || ''),
      h('td', {}, when(r.fire_ms, zone)),
      h('td', { translate: 'no' }, r.executor_id || ''),
      h('td', {}, statusCell(r)),
      h('td', { translate: 'no' }, r.handle_msg || r.trigger_msg || ''),
      h('td', {}, killButton(r)))) : h('tr', {}, h('td', { colspan: 8, class: 'muted' }, t('logs.none')))))));
  main.append(h('div', { class: 'pager' },
    f.before ? h('button', { type: 'button', onclick: () => history.back() }, t('common.newer')) : null,
    h('button', { type: 'button', disabled: !page.next, onclick: () => go(page.next) }, t('common.older'))));
}

/** Cleaning logs (XXL-JOB's 清理): the filter's job, else its group, else
 *  every group's (admins), by one of XXL-JOB's nine presets. */
function cleanBox(f, job) {
  const scope = f.job_id ? { job_id: Number(f.job_id) } : f.group ? { group: f.group } : {};
  const scopeText = f.job_id ? t('clean.scopeJob', { id: f.job_id }) : f.group ? t('clean.scopeGroup', { group: f.group }) : t('clean.scopeAll');
  const preset = select([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => [String(n), t(`clean.preset${n}`)]), '1');
  const err = banner();
  const done = h('p', { role: 'status', id: 'clean-result' });
  const dialog = h('details', { class: 'clean' }, h('summary', {}, t('clean.title')));
  const form = h('form', { class: 'toolbar', 'aria-label': t('clean.title'), onsubmit: async (e) => {
    e.preventDefault();
    const label = preset.selectedOptions[0].textContent;
    if (!confirm(t('clean.confirm', { scope: scopeText, rule: label }))) return;
    try {
      const r = await api('POST', '/api/v1/logs/clean', { ...scope, preset: Number(preset.value) });
      done.textContent = t('clean.done', { count: r.deleted });
    } catch (e2) { showError(form, err, e2); }
  } }, h('p', { class: 'muted' }, scopeText, job ? [' · ', h('span', { translate: 'no' }, job.description || job.handler || '')] : null),
  field(t('clean.rule'), 'preset', preset),
  h('button', { type: 'submit', class: 'danger' }, t('clean.submit')));
  dialog.append(form, err, done);
  return dialog;
}

export async function logDetail(main, { trigger }, _, ctx) {
  const id = decodeURIComponent(trigger);
  main.append(h('h1', {}, t('logs.trigger'), ' ', h('span', { translate: 'no' }, id)));
  const facts = h('dl', { class: 'facts' });
  const lines = h('pre', { class: 'log', 'aria-live': 'polite', 'aria-label': t('logs.lines'), translate: 'no' });
  const state = h('p', { class: 'muted', id: 'follow-state' });
  const err = banner();
  const kill = h('button', { type: 'button', class: 'danger', hidden: true, onclick: async () => {
    try {
      await api('POST', `/api/v1/logs/${encodeURIComponent(id)}/kill`);
      kill.disabled = true;
      state.textContent = t('logs.killWaiting');
    } catch (e) { showBanner(err, e); }
  } }, t('logs.kill'));
  main.append(h('div', { class: 'actions' }, kill), err, facts, h('h2', {}, t('logs.log')), state, lines);
  // The highest line shown: each poll asks only for the lines after it,
  // and polls never overlap (ctx.every), so no line is drawn twice.
  let lastSeq = null;
  let polledAfterEnd = 0;
  // The job's zone: its times are shown there.
  let zone;
  const draw = async () => {
    let tr;
    try {
      tr = await api('GET', `/api/v1/logs/${encodeURIComponent(id)}${query({ after_seq: lastSeq })}`);
    } catch (e) {
      if (e.status === 404) { state.textContent = t('logs.waitingFirst'); return true; }
      throw e;
    }
    const r = tr.log || {};
    if (zone === undefined && r.job_id !== undefined) {
      zone = await api('GET', `/api/v1/jobs/${r.job_id}`).then((j) => j.zone).catch(() => null);
    }
    const [st] = r.trigger_id ? statusOf(r) : ['running'];
    const alarm = r.alarm_status ? t(`alarm.status${r.alarm_status}`) : '—';
    facts.replaceChildren(
      h('dt', {}, t('logs.job')), h('dd', {}, r.job_id !== undefined ? link(`/jobs/${r.job_id}`, String(r.job_id)) : '—'),
      h('dt', {}, t('common.group')), h('dd', { translate: 'no' }, r.group || '—'),
      h('dt', {}, t('logs.status')), h('dd', {}, r.trigger_id ? statusCell(r) : t('status.running')),
      h('dt', {}, t('logs.type')), h('dd', {}, r.trigger_type ? t(`triggerType.${r.trigger_type}`) : '—'),
      h('dt', {}, t('logs.executor')), h('dd', { translate: 'no' }, r.executor_id || '—'),
      h('dt', {}, t('logs.params')), h('dd', { translate: 'no' }, r.params || '—'),
      h('dt', {}, t('logs.fired')), h('dd', {}, when(r.fire_ms, zone)),
      h('dt', {}, t('logs.sent')), h('dd', {}, when(r.trigger_ms, zone), r.trigger_msg ? h('span', { translate: 'no' }, ` ${r.trigger_msg}`) : ''),
      h('dt', {}, t('logs.started')), h('dd', {}, when(r.handle_start_ms, zone)),
      h('dt', {}, t('logs.ended')), h('dd', {}, when(r.handle_ms, zone)),
      h('dt', {}, t('logs.result')), h('dd', { translate: 'no' }, r.handle_code !== null && r.handle_code !== undefined ? `${r.handle_code} ${r.handle_msg || ''}` : '—'),
      h('dt', {}, t('logs.alarm')), h('dd', { id: 'alarm-status', dataset: { alarm: r.alarm_status ?? '' } }, alarm, r.alarm_msg ? [': ', h('span', { translate: 'no' }, r.alarm_msg)] : ''));
    for (const l of tr.lines) {
      if (lastSeq !== null && l.seq <= lastSeq) continue;
      lines.append(`${l.line}\n`);
      lastSeq = l.seq;
    }
    const running = st === 'running';
    kill.hidden = !running || !mayOperate(r.group);
    state.textContent = running ? t('logs.following') : t('logs.endedState');
    // After the result, two more polls pick up lines stored after it.
    if (!running) polledAfterEnd += 1;
    return running || polledAfterEnd < 3;
  };
  if (await draw()) ctx.every(1000, draw);
}
