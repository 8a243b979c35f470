// The jobs' screens: the list, the form (create and edit) with its
// actions, script versions and child-job picker.

import { api, query, h, link, when, field, showError, banner, mayOperate, navigate } from './ui.js';
import { SCHEDULE_TYPES, ROUTING, BLOCK, MISFIRE, GLUE } from './choices.js';
import { values, select, choice, explained, input, diff } from './widgets.js';

export async function jobs(main, _, params) {
  // Paged by offset: a page may end early (the API bounds a page in bytes),
  // so the next page starts where this one ended (`next_offset`).
  const offset = Math.max(0, Number(params.get('offset') || 0));
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
  const go = (o) => navigate(`/jobs${query({ q: q.value.trim(), group: group.value, enabled: enabled.value, schedule_type: type.value, sort: sort.value === '-id' ? '' : sort.value, offset: o || '' })}`);
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); go(0); } },
    field('Search', 'q', q), field('Group', 'group', group), field('Status', 'enabled', enabled),
    field('Schedule', 'schedule_type', type), field('Sort', 'sort', sort),
    h('button', { type: 'submit', class: 'primary' }, 'Search'),
    mayOperate() ? link('/jobs/new', 'New job') : null);
  for (const s of [group, enabled, type, sort]) s.addEventListener('change', () => go(0));
  main.append(h('h1', {}, 'Jobs'), form);
  const data = await api('GET', `/api/v1/jobs${query({ ...filters, limit: size, offset })}`);
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
  const next = data.next_offset;
  main.append(h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: offset === 0, onclick: () => go(Math.max(0, offset - size)) }, 'Previous'),
    h('span', {}, data.items.length ? `${offset + 1}–${offset + data.items.length}` : ''),
    h('button', { type: 'button', disabled: next === undefined, onclick: () => go(next) }, 'Next')));
}

/** The job form: new (`id` absent), edit, or copy (`from`). */
export async function jobForm(main, { id }, params, ctx) {
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
    owner: input(job.owner || '', { maxlength: 64 }),
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
    // Each stored value reads ***: sent back so, it is kept.
    secrets: h('textarea', { rows: 2, spellcheck: 'false', autocomplete: 'off', placeholder: 'NAME=value, one a line' },
      Object.entries(job.secrets || {}).map(([k, v]) => `${k}=${v}`).join('\n')),
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
      glue_type: c.glue_type.value, enabled: c.enabled.checked, owner: c.owner.value,
      secrets: Object.fromEntries(c.secrets.value.split('\n').map((l) => l.trim()).filter(Boolean)
        .map((l) => (l.includes('=') ? [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] : [l, '']))),
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
  field('Owner', 'owner', c.owner),
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
  field('Params', 'params', c.params, 'a secret as ${secret.NAME}'),
  field('Secrets', 'secrets', c.secrets, 'never shown again: each value reads ***'),
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
