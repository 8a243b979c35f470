// The console's screens. Each draws into `main` from the API's answers; a
// write goes through the API, whose refusal is shown next to its field.

import {
  api, query, h, link, when, field, showError, banner, session, navigate,
  mayOperate, isAdmin, safeNext,
} from './ui.js';
import { SCHEDULE_TYPES, ROUTING, BLOCK, MISFIRE, GLUE, ROLES } from './choices.js';

const values = (choices) => choices.map(([v]) => v);

/** A select of plain values or [value, label] pairs, showing the label. */
function select(options, value) {
  return h('select', {}, ...options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value }, label);
  }));
}

/** A select of the API's values (choices.js), showing each value. */
function choice(options, value) {
  return h('select', {}, ...options.map(([v]) => h('option', { value: v, selected: v === value }, v)));
}

/** A field for a `choice`, the chosen value's one-line explanation under
 *  it (its hint, which the control is described by). */
function explained(label, name, control, options) {
  const explain = () => (options.find(([v]) => v === control.value) || [])[1] || '';
  const box = field(label, name, control, explain());
  control.addEventListener('change', () => { box.querySelector(`#hint-${name}`).textContent = explain(); });
  return box;
}

function input(value, attrs) {
  return h('input', { value: value ?? '', ...attrs });
}

function statusOf(row) {
  if (row.handle_code === 200) return ['success', 'ok'];
  if ((row.trigger_code !== null && row.trigger_code !== undefined && row.trigger_code !== 200)
      || (row.handle_code && row.handle_code !== 200)) return ['failure', 'bad'];
  return ['running', 'run'];
}

function statusCell(row) {
  const [text, cls] = statusOf(row);
  return h('span', { class: `status ${cls}` }, text);
}

// ---- sign-in -----------------------------------------------------------

async function login(main, _, params) {
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

async function dashboard(main, _, __, ctx) {
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

async function jobs(main, _, params) {
  const page = Number(params.get('page') || 0);
  const size = 20;
  const filters = {
    q: params.get('q') || '', group: params.get('group') || '', enabled: params.get('enabled') || '',
    schedule_type: params.get('schedule_type') || '', sort: params.get('sort') || '-id',
  };
  const groups = await api('GET', '/api/v1/groups');
  const q = input(filters.q, { type: 'search', placeholder: 'id, description or handler' });
  const group = select([['', 'all groups'], ...groups.map((g) => g.app)], filters.group);
  const enabled = select([['', 'any status'], ['true', 'running'], ['false', 'stopped']], filters.enabled);
  const type = select([['', 'any schedule'], ...values(SCHEDULE_TYPES)], filters.schedule_type);
  const sort = select([['-id', 'newest'], ['id', 'oldest'], ['description', 'description A-Z'], ['-description', 'description Z-A'], ['-updated', 'recently changed']], filters.sort);
  const go = (p) => navigate(`/jobs${query({ q: q.value.trim(), group: group.value, enabled: enabled.value, schedule_type: type.value, sort: sort.value === '-id' ? '' : sort.value, page: p || '' })}`);
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); go(0); } },
    field('Search', 'q', q), field('Group', 'group', group), field('Status', 'enabled', enabled),
    field('Schedule', 'schedule_type', type), field('Sort', 'sort', sort),
    h('button', { type: 'submit', class: 'primary' }, 'Search'),
    mayOperate() ? link('/jobs/new', 'New job') : null);
  for (const s of [group, enabled, type, sort]) s.addEventListener('change', () => go(0));
  main.append(h('h1', {}, 'Jobs'), form);
  const data = await api('GET', `/api/v1/jobs${query({ ...filters, limit: size, offset: page * size })}`);
  const rows = data.items.map((j) => h('tr', {},
    h('td', {}, link(`/jobs/${j.id}`, String(j.id))),
    h('td', {}, link(`/jobs/${j.id}`, j.description || '(no description)')),
    h('td', { class: 'hide-narrow' }, j.group),
    h('td', {}, `${j.schedule_type} ${j.schedule_conf}`),
    h('td', { class: 'hide-narrow' }, j.handler),
    h('td', {}, h('span', { class: j.enabled ? 'status ok' : 'status muted' }, j.enabled ? 'running' : 'stopped')),
    h('td', {}, link(`/logs${query({ job_id: j.id })}`, 'logs'))));
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, `${data.total}${data.total_exact ? '' : '+'} jobs`),
    h('thead', {}, h('tr', {}, ...['Id', 'Description', 'Group', 'Schedule', 'Handler', 'Status', ''].map((t, i) => h('th', { scope: 'col', class: i === 2 || i === 4 ? 'hide-narrow' : undefined }, t)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No job matches.'))))));
  const more = data.total_exact ? (page + 1) * size < data.total : data.items.length === size;
  main.append(h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: page === 0, onclick: () => go(page - 1) }, 'Previous'),
    h('span', {}, `Page ${page + 1}`),
    h('button', { type: 'button', disabled: !more, onclick: () => go(page + 1) }, 'Next')));
}

/** The job form: new (`id` absent), edit, or copy (`from`). */
async function jobForm(main, { id }, params, ctx) {
  const editing = id !== undefined;
  const from = params.get('copy');
  const source = editing ? await api('GET', `/api/v1/jobs/${id}`) : from ? await api('GET', `/api/v1/jobs/${from}`) : null;
  const groups = await api('GET', '/api/v1/groups');
  const job = source || { schedule_type: 'CRON', schedule_conf: '0 0 2 * * ?', routing: 'FIRST', block: 'SERIAL_EXECUTION', misfire: 'DO_NOTHING', glue_type: 'BEAN', enabled: true, zone: '', child_jobs: [] };
  const canWrite = mayOperate(job.group);
  const err = banner();
  const c = {
    group: select(groups.map((g) => g.app), job.group),
    description: input(job.description, {}),
    schedule_type: choice(SCHEDULE_TYPES, job.schedule_type),
    schedule_conf: input(job.schedule_conf, { autocomplete: 'off', spellcheck: 'false' }),
    zone: input(job.zone, { placeholder: 'cluster default', list: 'zones' }),
    handler: input(job.handler, {}),
    params: h('textarea', { rows: 3 }, job.params || ''),
    routing: choice(ROUTING, job.routing),
    block: choice(BLOCK, job.block),
    misfire: choice(MISFIRE, job.misfire),
    misfire_threshold_ms: input(job.misfire_threshold_ms ?? '', { type: 'number', min: 1000, placeholder: 'cluster default' }),
    timeout_s: input(job.timeout_s || 0, { type: 'number', min: 0 }),
    retries: input(job.retries || 0, { type: 'number', min: 0 }),
    retry_backoff_s: input(job.retry_backoff_s || 0, { type: 'number', min: 0 }),
    child_jobs: input((job.child_jobs || []).join(', '), { placeholder: 'job ids, comma separated', autocomplete: 'off' }),
    alarm_email: input(job.alarm_email, { type: 'email' }),
    alarm_webhook: input(job.alarm_webhook, { type: 'url' }),
    glue_type: choice(GLUE, job.glue_type),
    glue_source: h('textarea', { rows: 10, spellcheck: 'false', dataset: { wide: '1' } }, job.glue_source || ''),
    glue_remark: input('', { placeholder: 'what changed (kept with the version)' }),
    enabled: h('input', { type: 'checkbox', checked: job.enabled }),
  };
  if (!canWrite) for (const el of Object.values(c)) el.disabled = true;
  const picker = canWrite ? childPicker(c.child_jobs, editing ? Number(id) : null) : null;
  const errOf = (name) => main.querySelector(`#err-${CSS.escape(name)}`);
  const preview = h('ol', { class: 'preview', 'aria-live': 'polite', id: 'preview' });
  // The browser's own list of IANA zones, offered as the zone is typed.
  const zones = h('datalist', { id: 'zones' },
    ...(Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : []).map((z) => h('option', { value: z })));
  let timer = null;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        const next = await api('POST', '/api/v1/schedules/preview', {
          schedule_type: c.schedule_type.value, schedule_conf: c.schedule_conf.value,
          zone: c.zone.value || undefined, count: 5,
        });
        const spot = errOf('schedule_conf');
        if (spot) spot.textContent = '';
        preview.replaceChildren(...next.fires.map((f) => h('li', { title: `UTC ${f.utc}` }, f.local)));
        if (!next.fires.length) preview.replaceChildren(h('li', { class: 'muted' }, 'fires only when triggered'));
      } catch (e) {
        preview.replaceChildren();
        const spot = (e.field && errOf(e.field)) || errOf('schedule_conf');
        if (spot) spot.textContent = e.message;
      }
    }, 250);
  };
  for (const k of ['schedule_type', 'schedule_conf', 'zone']) c[k].addEventListener('input', refresh);
  c.schedule_type.addEventListener('change', refresh);
  const body = () => {
    const out = {
      group: c.group.value, description: c.description.value, schedule_type: c.schedule_type.value,
      schedule_conf: c.schedule_conf.value, handler: c.handler.value, params: c.params.value,
      routing: c.routing.value, block: c.block.value, misfire: c.misfire.value,
      timeout_s: Number(c.timeout_s.value || 0), retries: Number(c.retries.value || 0),
      retry_backoff_s: Number(c.retry_backoff_s.value || 0),
      child_jobs: c.child_jobs.value.split(',').map((s) => s.trim()).filter(Boolean).map(Number),
      alarm_email: c.alarm_email.value, alarm_webhook: c.alarm_webhook.value,
      glue_type: c.glue_type.value, enabled: c.enabled.checked,
    };
    if (c.zone.value) out.zone = c.zone.value;
    if (c.misfire_threshold_ms.value) out.misfire_threshold_ms = Number(c.misfire_threshold_ms.value);
    if (out.glue_type !== 'BEAN') {
      out.glue_source = c.glue_source.value;
      if (c.glue_remark.value) out.glue_remark = c.glue_remark.value;
      if (!out.handler) delete out.handler;
    }
    return out;
  };
  const form = h('form', {
    class: 'form',
    'aria-label': 'Job',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const saved = editing
          ? await api('PUT', `/api/v1/jobs/${id}`, body())
          : await api('POST', '/api/v1/jobs', body());
        navigate(`/jobs/${saved.id}`, editing);
      } catch (e2) { showError(form, err, e2); }
    },
  },
  field('Group', 'group', c.group),
  field('Description', 'description', c.description),
  explained('Schedule type', 'schedule_type', c.schedule_type, SCHEDULE_TYPES),
  h('div', {}, field('Schedule', 'schedule_conf', c.schedule_conf), h('span', { class: 'hint' }, 'Next 5 fires:'), preview),
  field('Time zone', 'zone', c.zone, 'IANA name, e.g. Asia/Shanghai'),
  field('Handler', 'handler', c.handler, 'BEAN jobs: the executor handler'),
  explained('Routing', 'routing', c.routing, ROUTING),
  explained('When a trigger is still running', 'block', c.block, BLOCK),
  explained('Misfire', 'misfire', c.misfire, MISFIRE),
  field('Misfire threshold (ms)', 'misfire_threshold_ms', c.misfire_threshold_ms),
  field('Timeout (s, 0 = none)', 'timeout_s', c.timeout_s),
  field('Retries', 'retries', c.retries),
  field('Retry backoff (s)', 'retry_backoff_s', c.retry_backoff_s),
  h('div', {}, field('Child jobs', 'child_jobs', c.child_jobs, 'run after a success'), picker),
  field('Alarm e-mail', 'alarm_email', c.alarm_email),
  field('Alarm webhook', 'alarm_webhook', c.alarm_webhook),
  field('Params', 'params', c.params),
  explained('Script type', 'glue_type', c.glue_type, GLUE),
  field('Script', 'glue_source', c.glue_source),
  field('Version remark', 'glue_remark', c.glue_remark),
  field('Running', 'enabled', c.enabled),
  h('div', { class: 'wide' }, err,
    canWrite ? h('button', { type: 'submit', class: 'primary' }, editing ? 'Save' : 'Create') : h('p', { class: 'muted' }, 'Read only: your role cannot change this job.')));
  main.append(h('h1', {}, editing ? `Job ${id}` : 'New job'));
  if (editing) main.append(jobActions(job), h('p', { class: 'muted' }, 'Next fire: ', when(job.next_fire_ms), ' · changed ', when(job.updated_ms)));
  // A BEAN job names a handler; a script job keeps its source instead.
  const kind = () => {
    const bean = c.glue_type.value === 'BEAN';
    c.handler.closest('.field').hidden = !bean;
    for (const k of ['glue_source', 'glue_remark']) c[k].closest('.field').hidden = bean;
  };
  c.glue_type.addEventListener('change', kind);
  kind();
  main.append(form, zones);
  if (editing && job.glue_type !== 'BEAN') main.append(await scriptVersions(job, ctx));
  refresh();
}

function jobActions(job) {
  const err = banner();
  const can = mayOperate(job.group);
  const act = (label, fn, cls) => h('button', { type: 'button', class: cls, disabled: !can, onclick: async () => {
    try { await fn(); } catch (e) { err.textContent = e.message; err.hidden = false; }
  } }, label);
  const params = input('', { placeholder: 'params for this run', 'aria-label': 'Params for this run' });
  return h('div', {},
    h('div', { class: 'actions' },
      job.enabled
        ? act('Stop', async () => { await api('POST', `/api/v1/jobs/${job.id}/stop`); navigate(location.pathname, true); })
        : act('Start', async () => { await api('POST', `/api/v1/jobs/${job.id}/start`); navigate(location.pathname, true); }),
      params,
      act('Trigger once', async () => {
        const t = await api('POST', `/api/v1/jobs/${job.id}/trigger`, params.value ? { params: params.value } : undefined);
        const sent = (t.triggers || []).find((r) => r.code === 200) || (t.triggers || [])[0];
        if (sent && sent.code !== 200) throw new Error(`not sent: ${sent.msg}`);
        navigate(sent ? `/logs/${encodeURIComponent(sent.trigger.trigger_id)}` : `/logs${query({ job_id: job.id })}`);
      }),
      link(`/jobs/new${query({ copy: job.id })}`, 'Copy'),
      link(`/logs${query({ job_id: job.id })}`, 'Logs'),
      act('Delete', async () => {
        if (!confirm(`Delete job ${job.id} (${job.description || job.handler})? Its logs stay.`)) return;
        await api('DELETE', `/api/v1/jobs/${job.id}`);
        navigate('/jobs');
      }, 'danger')),
    err);
}

/** The kept versions of a job's script. They are stored in MySQL by the
 *  persistence worker, behind the save: while the newest (the job's
 *  `glue_version`) is not there yet, the list says so and looks again. */
async function scriptVersions(job, ctx) {
  const box = h('section', { 'aria-labelledby': 'versions' });
  const shown = h('pre', { class: 'log', hidden: true, 'aria-label': 'Difference' });
  const err = banner();
  const draw = async () => {
    const list = (await api('GET', `/api/v1/jobs/${job.id}/scripts`)).items;
    const newest = list.reduce((m, v) => Math.max(m, v.version), 0);
    const pending = newest < job.glue_version;
    box.replaceChildren(h('h2', { id: 'versions' }, 'Script versions'),
      h('p', { class: 'muted', role: 'status' }, pending ? `Version ${job.glue_version} is being stored…` : ''),
      err,
      h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, ...['Version', 'Remark', 'Saved', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, ...list.map((v) => h('tr', {},
          h('td', {}, String(v.version)), h('td', {}, v.glue_remark), h('td', {}, when(v.created_ms)),
          h('td', { class: 'actions' },
            h('button', { type: 'button', onclick: () => { shown.textContent = diff(v.glue_source, job.glue_source); shown.hidden = false; } }, 'Diff with current'),
            mayOperate(job.group) && v.version !== job.glue_version ? h('button', { type: 'button', onclick: async () => {
              try {
                await api('POST', `/api/v1/jobs/${job.id}/scripts/${v.version}/restore`, { remark: `restored version ${v.version}` });
                navigate(location.pathname, true);
              } catch (e) { err.textContent = e.message; err.hidden = false; }
            } }, 'Restore') : null)))))), shown);
    return pending;
  };
  if (await draw()) ctx.every(1000, draw);
  return box;
}

/** Finds jobs by id, description or handler and adds them to the child
 *  jobs field (`control`, a comma-separated id list the API validates). */
function childPicker(control, self) {
  const ids = () => control.value.split(',').map((v) => v.trim()).filter(Boolean);
  const search = input('', { type: 'search', placeholder: 'find a job to add', 'aria-label': 'Find a child job', autocomplete: 'off' });
  const found = h('ul', { class: 'picker', 'aria-live': 'polite', 'aria-label': 'Jobs found' });
  let timer = null;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const q = search.value.trim();
      if (!q) { found.replaceChildren(); return; }
      try {
        const page = await api('GET', `/api/v1/jobs${query({ q, limit: 8 })}`);
        const items = page.items.filter((j) => j.id !== self);
        found.replaceChildren(...(items.length ? items.map((j) => h('li', {},
          h('button', { type: 'button', 'aria-label': `Add job ${j.id} as a child`, onclick: () => {
            const now = ids();
            if (!now.includes(String(j.id))) now.push(String(j.id));
            control.value = now.join(', ');
            control.dispatchEvent(new Event('input'));
          } }, 'Add'),
          ` ${j.id} · ${j.description || j.handler} (${j.group})`)) : [h('li', { class: 'muted' }, 'No job matches.')]));
      } catch (e) {
        found.replaceChildren(h('li', { class: 'field-error' }, e.message));
      }
    }, 250);
  });
  return h('div', { class: 'picker-box' }, search, found);
}

/** A line diff (`-` old, `+` current) by longest common subsequence. */
function diff(old, cur) {
  const a = (old || '').split('\n'); const b = (cur || '').split('\n');
  const m = a.length; const n = b.length;
  if (m * n > 250000) return `(too long to compare here)\n--- version\n${old}\n+++ current\n${cur}`;
  const dp = Array.from({ length: m + 1 }, () => new Array(n + 1).fill(0));
  for (let i = m - 1; i >= 0; i--) for (let j = n - 1; j >= 0; j--) dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  const out = []; let i = 0; let j = 0;
  while (i < m && j < n) {
    if (a[i] === b[j]) { out.push(`  ${a[i]}`); i++; j++; } else if (dp[i + 1][j] >= dp[i][j + 1]) out.push(`- ${a[i++]}`); else out.push(`+ ${b[j++]}`);
  }
  while (i < m) out.push(`- ${a[i++]}`);
  while (j < n) out.push(`+ ${b[j++]}`);
  return out.join('\n');
}

// ---- logs --------------------------------------------------------------

function toMs(local) { return local ? new Date(local).getTime() : ''; }
function toLocalInput(ms) {
  if (!ms) return '';
  const d = new Date(Number(ms));
  const pad = (v) => String(v).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

async function logs(main, _, params) {
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
const ALARM = { 1: 'not needed', 2: 'sent', 3: 'sending failed' };

async function logDetail(main, { trigger }, _, ctx) {
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

/** How long ago `ms` was, shortly. */
function age(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

function executorTable(list, withGroup) {
  const state = (e) => h('span', { class: `status ${e.state === 'live' ? 'ok' : 'muted'}` }, e.state);
  const heads = ['Executor', ...(withGroup ? ['Group'] : []), 'State', 'Heartbeat', 'Host', 'Handlers', 'Running jobs'];
  return h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...heads.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, list.length ? list.map((e) => h('tr', {},
      h('td', {}, e.id),
      withGroup ? h('td', {}, link(`/groups/${encodeURIComponent(e.group)}`, e.group)) : null,
      h('td', {}, state(e)),
      h('td', {}, e.last_seen_ms ? h('span', { title: new Date(e.last_seen_ms).toISOString() }, `${age(e.age_ms)} ago`) : '—'),
      h('td', {}, e.host ? `${e.host}${e.pid ? ` (pid ${e.pid})` : ''}` : '—'),
      h('td', {}, e.handlers.length ? e.handlers.join(', ') : '—'),
      h('td', {}, e.running_jobs.length
        ? e.running_jobs.flatMap((j, i) => [i ? ', ' : '', link(`/logs${query({ job_id: j, status: 'running' })}`, String(j))])
        : 'idle'))) : h('tr', {}, h('td', { colspan: heads.length, class: 'muted' }, 'No executor has registered.')))));
}

async function groupsScreen(main) {
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

async function groupScreen(main, { app }, _, ctx) {
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

async function clusterScreen(main, _, __, ctx) {
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

async function account(main) {
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

/** Checkboxes for the groups a user is granted. */
function groupBoxes(all, granted, prefix) {
  const box = h('fieldset', { class: 'groups' }, h('legend', {}, 'Groups granted'));
  for (const g of all) {
    const cb = h('input', { type: 'checkbox', value: g, id: `${prefix}-${g}`, checked: granted.includes(g) });
    box.append(h('label', { for: cb.id }, cb, ` ${g}`));
  }
  if (!all.length) box.append(h('span', { class: 'muted' }, 'No group yet.'));
  box.granted = () => [...box.querySelectorAll('input:checked')].map((c) => c.value);
  return box;
}

async function users(main) {
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

async function userScreen(main, { name }) {
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

async function audit(main, _, params) {
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

/** Path patterns and their screens, first match wins. */
/** The screens by name, as routes.js names them. */
export const screens = {
  login, dashboard, jobs, jobForm, logs, logDetail, groupsScreen, groupScreen,
  clusterScreen, account, users, userScreen, audit,
};
