// The jobs' screens: the list, the form (create and edit) with its
// actions (trigger on chosen executors, kill all), script versions with
// the editor, missed fires, the change history and the child-job picker.

import { session, api, query, h, link, when, formatTime, field, showError, showBanner, errorNodes, banner, mayOperate, navigate } from './ui.js';
import { SCHEDULE_TYPES, ROUTING, BLOCK, MISFIRE, GLUE } from './choices.js';
import { select, choice, explained, input, diff, changeList } from './widgets.js';
import { scriptEditor, templateFor } from './editor.js';
import { t } from './i18n.js';

export async function jobs(main, _, params) {
  // Paged by offset: a page may end early (the API bounds a page in bytes),
  // so the next page starts where this one ended (`next_offset`).
  const offset = Math.max(0, Number(params.get('offset') || 0));
  const size = 20;
  const filters = {
    q: params.get('q') || '', group: params.get('group') || '', enabled: params.get('enabled') || '',
    schedule_type: params.get('schedule_type') || '', owner: params.get('owner') || '', sort: params.get('sort') || '-id',
  };
  const groups = await api('GET', '/api/v1/groups');
  const q = input(filters.q, { type: 'search', placeholder: t('jobs.searchHint') });
  const group = select([['', t('filter.allGroups')], ...groups.map((g) => g.app)], filters.group);
  const enabled = select([['', t('filter.anyStatus')], ['true', t('jobs.running')], ['false', t('jobs.stopped')]], filters.enabled);
  const type = select([['', t('filter.anySchedule')], ...SCHEDULE_TYPES.map((v) => [v, t(`choice.SCHEDULE_TYPES.${v}`)])], filters.schedule_type);
  const owner = input(filters.owner, { maxlength: 64, autocomplete: 'off', placeholder: t('jobs.anyOwner') });
  const sort = select([['-id', t('jobs.sortNewest')], ['id', t('jobs.sortOldest')], ['description', t('jobs.sortAz')], ['-description', t('jobs.sortZa')], ['-updated', t('jobs.sortChanged')]], filters.sort);
  const go = (o) => navigate(`/jobs${query({ q: q.value.trim(), group: group.value, enabled: enabled.value, schedule_type: type.value, owner: owner.value.trim(), sort: sort.value === '-id' ? '' : sort.value, offset: o || '' })}`);
  const me = session.me.username;
  const mine = filters.owner === me;
  const form = h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); go(0); } },
    field(t('jobs.search'), 'q', q), field(t('common.group'), 'group', group), field(t('logs.status'), 'enabled', enabled),
    field(t('jobs.schedule'), 'schedule_type', type), field(t('jobs.owner'), 'owner', owner), field(t('jobs.sort'), 'sort', sort),
    h('button', { type: 'submit', class: 'primary' }, t('jobs.searchButton')),
    h('button', { type: 'button', 'aria-pressed': mine ? 'true' : 'false', id: 'my-jobs', onclick: () => {
      owner.value = mine ? '' : me;
      go(0);
    } }, t('jobs.myJobs')),
    mayOperate() ? link('/jobs/new', t('jobs.new')) : null);
  for (const el of [group, enabled, type, sort]) el.addEventListener('change', () => go(0));
  main.append(h('h1', {}, t('jobs.title')), form);
  const data = await api('GET', `/api/v1/jobs${query({ ...filters, limit: size, offset })}`);
  const rows = data.items.map((j) => h('tr', { dataset: { job: j.id } },
    h('td', {}, link(`/jobs/${j.id}`, String(j.id))),
    h('td', {}, link(`/jobs/${j.id}`, j.description ? h('span', { translate: 'no' }, j.description) : t('jobs.noDescription'))),
    h('td', { class: 'hide-narrow', translate: 'no' }, j.group),
    h('td', {}, t(`choice.SCHEDULE_TYPES.${j.schedule_type}`), ' ', h('code', { translate: 'no' }, j.schedule_conf)),
    h('td', { class: 'hide-narrow', translate: 'no' }, j.handler),
    h('td', { class: 'hide-narrow', translate: 'no' }, j.owner || ''),
    h('td', {}, h('span', { class: j.enabled ? 'status ok' : 'status muted' }, j.enabled ? t('jobs.running') : t('jobs.stopped'))),
    h('td', {}, link(`/logs${query({ job_id: j.id })}`, t('jobs.logs')))));
  const heads = ['jobs.id', 'jobs.description', 'common.group', 'jobs.schedule', 'jobs.handler', 'jobs.owner', 'logs.status', ''];
  const narrow = new Set([2, 4, 5]);
  main.append(h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, t(data.total_exact ? 'jobs.count' : 'jobs.countAtLeast', { count: data.total })),
    h('thead', {}, h('tr', {}, ...heads.map((k, i) => h('th', { scope: 'col', class: narrow.has(i) ? 'hide-narrow' : undefined }, k ? t(k) : '')))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: heads.length, class: 'muted' }, t('jobs.none')))))));
  const next = data.next_offset;
  main.append(h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: offset === 0, onclick: () => go(Math.max(0, offset - size)) }, t('common.previous')),
    h('span', {}, data.items.length ? `${offset + 1}–${offset + data.items.length}` : ''),
    h('button', { type: 'button', disabled: next === undefined, onclick: () => go(next) }, t('common.next'))));
}

/** The job form: new (`id` absent), edit, or copy (`from`). */
export async function jobForm(main, { id }, params, ctx) {
  const editing = id !== undefined;
  const from = params.get('copy');
  const source = editing ? await api('GET', `/api/v1/jobs/${id}`) : from ? await api('GET', `/api/v1/jobs/${from}`) : null;
  const [groups, channels] = await Promise.all([
    api('GET', '/api/v1/groups'),
    api('GET', '/api/v1/alarm-channels').catch(() => null),
  ]);
  const job = source || { schedule_type: 'CRON', schedule_conf: '0 0 2 * * ?', routing: 'FIRST', block: 'SERIAL_EXECUTION', misfire: 'DO_NOTHING', glue_type: 'BEAN', enabled: true, zone: '', child_jobs: [], owner: session.me.username };
  const canWrite = mayOperate(job.group);
  const err = banner();
  const c = {
    group: select(groups.map((g) => g.app), job.group),
    description: input(job.description, {}),
    owner: input(job.owner || '', { maxlength: 64 }),
    schedule_type: choice(SCHEDULE_TYPES, job.schedule_type, 'SCHEDULE_TYPES'),
    schedule_conf: input(job.schedule_conf, { autocomplete: 'off', spellcheck: 'false' }),
    zone: input(job.zone, { placeholder: t('job.zoneDefault'), list: 'zones' }),
    handler: input(job.handler, {}),
    params: h('textarea', { rows: 3 }, job.params || ''),
    routing: choice(ROUTING, job.routing, 'ROUTING'),
    block: choice(BLOCK, job.block, 'BLOCK'),
    misfire: choice(MISFIRE, job.misfire, 'MISFIRE'),
    misfire_threshold_ms: input(job.misfire_threshold_ms ?? '', { type: 'number', min: 1000, placeholder: t('job.zoneDefault') }),
    timeout_s: input(job.timeout_s || 0, { type: 'number', min: 0 }),
    retries: input(job.retries || 0, { type: 'number', min: 0 }),
    retry_backoff_s: input(job.retry_backoff_s || 0, { type: 'number', min: 0 }),
    child_jobs: input((job.child_jobs || []).join(', '), { placeholder: t('job.childHint'), autocomplete: 'off' }),
    alarm_email: input(job.alarm_email, { type: 'email' }),
    alarm_webhook: input(job.alarm_webhook, { type: 'url' }),
    glue_type: choice(GLUE, job.glue_type, 'GLUE'),
    glue_source: h('textarea', { rows: 14, spellcheck: 'false', dataset: { wide: '1' } }, job.glue_source || ''),
    glue_remark: input('', { placeholder: t('job.remarkHint') }),
    // Each stored value reads ***: sent back so, it is kept.
    secrets: h('textarea', { rows: 2, spellcheck: 'false', autocomplete: 'off', placeholder: t('job.secretsPlaceholder') },
      Object.entries(job.secrets || {}).map(([k, v]) => `${k}=${v}`).join('\n')),
    enabled: h('input', { type: 'checkbox', checked: job.enabled }),
  };
  // The alarm channels, chosen by name (when the caller may list them).
  const chosen = new Set(job.alarm_channels || []);
  const channelBox = h('fieldset', { class: 'groups', id: 'f-alarm_channels' }, h('legend', {}, t('job.alarmChannels')),
    ...(channels || []).map((ch) => {
      const cb = h('input', { type: 'checkbox', value: ch.name, id: `ch-${ch.name}`, checked: chosen.has(ch.name), disabled: !canWrite });
      return h('label', { for: cb.id }, cb, ' ', h('span', { translate: 'no' }, ch.name), h('span', { class: 'muted' }, ` (${t(`ops.kind.${ch.kind}`)})`));
    }),
    channels && !channels.length ? h('span', { class: 'muted' }, t('job.noChannels')) : null);
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
        preview.replaceChildren(...next.fires.map((f) => h('li', { title: `UTC ${f.utc}` }, formatTime(new Date(f.at_ms), next.zone))));
        preview.classList.toggle('none', !next.fires.length);
        if (!next.fires.length) preview.replaceChildren(h('li', { class: 'muted' }, t('job.onlyTriggered')));
      } catch (e) {
        preview.replaceChildren();
        const spot = (e.field && errOf(e.field)) || errOf('schedule_conf');
        if (spot) spot.replaceChildren(...errorNodes(e));
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
      child_jobs: c.child_jobs.value.split(',').map((v) => v.trim()).filter(Boolean).map(Number),
      alarm_email: c.alarm_email.value, alarm_webhook: c.alarm_webhook.value,
      glue_type: c.glue_type.value, enabled: c.enabled.checked, owner: c.owner.value,
      secrets: Object.fromEntries(c.secrets.value.split('\n').map((l) => l.trim()).filter(Boolean)
        .map((l) => (l.includes('=') ? [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] : [l, '']))),
    };
    if (channels) out.alarm_channels = [...channelBox.querySelectorAll('input:checked')].map((cb) => cb.value);
    if (c.zone.value) out.zone = c.zone.value;
    if (c.misfire_threshold_ms.value) out.misfire_threshold_ms = Number(c.misfire_threshold_ms.value);
    if (out.glue_type !== 'BEAN') {
      out.glue_source = c.glue_source.value;
      if (c.glue_remark.value) out.glue_remark = c.glue_remark.value;
      if (!out.handler) delete out.handler;
    }
    return out;
  };
  const template = h('button', { type: 'button', id: 'insert-template', onclick: () => {
    if (c.glue_source.value.trim() && !confirm(t('script.replaceConfirm'))) return;
    c.glue_source.value = templateFor(c.glue_type.value);
  } }, t('script.insertTemplate'));
  const form = h('form', {
    class: 'form',
    'aria-label': t('job.formLabel'),
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
  field(t('common.group'), 'group', c.group),
  field(t('jobs.description'), 'description', c.description),
  field(t('jobs.owner'), 'owner', c.owner),
  explained(t('job.scheduleType'), 'schedule_type', c.schedule_type, 'SCHEDULE_TYPES'),
  h('div', {}, field(t('jobs.schedule'), 'schedule_conf', c.schedule_conf), h('span', { class: 'hint' }, t('job.next5')), preview),
  field(t('job.zone'), 'zone', c.zone, t('job.zoneHint')),
  field(t('jobs.handler'), 'handler', c.handler, t('job.handlerHint')),
  explained(t('job.routing'), 'routing', c.routing, 'ROUTING'),
  explained(t('job.block'), 'block', c.block, 'BLOCK'),
  explained(t('job.misfire'), 'misfire', c.misfire, 'MISFIRE'),
  field(t('job.misfireThreshold'), 'misfire_threshold_ms', c.misfire_threshold_ms),
  field(t('job.timeout'), 'timeout_s', c.timeout_s),
  field(t('job.retries'), 'retries', c.retries),
  field(t('job.retryBackoff'), 'retry_backoff_s', c.retry_backoff_s),
  h('div', {}, field(t('job.childJobs'), 'child_jobs', c.child_jobs, t('job.childAfter')), picker),
  field(t('job.alarmEmail'), 'alarm_email', c.alarm_email),
  field(t('job.alarmWebhook'), 'alarm_webhook', c.alarm_webhook),
  channels ? h('div', {}, channelBox, h('span', { class: 'field-error', id: 'err-alarm_channels', role: 'alert' })) : null,
  field(t('logs.params'), 'params', c.params, t('job.paramsHint')),
  field(t('job.secrets'), 'secrets', c.secrets, t('job.secretsHint')),
  explained(t('job.scriptType'), 'glue_type', c.glue_type, 'GLUE'),
  h('div', { class: 'wide script-field' }, field(t('job.script'), 'glue_source', c.glue_source), canWrite ? template : null),
  field(t('job.remark'), 'glue_remark', c.glue_remark),
  field(t('job.enabled'), 'enabled', c.enabled),
  h('div', { class: 'wide' }, err,
    canWrite ? h('button', { type: 'submit', class: 'primary' }, editing ? t('common.save') : t('job.create')) : h('p', { class: 'muted' }, t('job.readOnly'))));
  // The script's field holds the editor, which takes the textarea's place
  // and keeps it as the form's control.
  const editor = scriptEditor(c.glue_source, c.glue_type.value);
  main.append(h('h1', {}, editing ? t('job.title', { id }) : t('job.newTitle')));
  if (editing) {
    main.append(jobActions(job), h('p', { class: 'muted' }, t('job.nextFire'), ' ', when(job.next_fire_ms, job.zone), ' · ', t('common.changed'), ' ', when(job.updated_ms, job.zone)));
  }
  // A BEAN job names a handler; a script job keeps its source instead.
  let lastType = c.glue_type.value;
  const kind = () => {
    const bean = c.glue_type.value === 'BEAN';
    c.handler.closest('.field').hidden = !bean;
    c.glue_source.closest('.script-field').hidden = bean;
    c.glue_remark.closest('.field').hidden = bean;
    editor.setType(c.glue_type.value);
    // A new script type starts from its template, unless something of
    // the user's own is written there.
    const src = c.glue_source.value;
    if (!bean && canWrite && (!src.trim() || src === templateFor(lastType))) {
      c.glue_source.value = templateFor(c.glue_type.value);
    }
    lastType = c.glue_type.value;
  };
  c.glue_type.addEventListener('change', kind);
  kind();
  main.append(form, zones);
  if (editing) {
    const edit = (v) => {
      c.glue_source.value = v.glue_source;
      c.glue_remark.value = t('script.editedFrom', { version: v.version });
      c.glue_source.focus();
    };
    if (job.glue_type !== 'BEAN') main.append(await scriptVersions(job, ctx, canWrite ? edit : null));
    main.append(await missedFires(job), await changeHistory(job));
  }
  refresh();
}

function jobActions(job) {
  const err = banner();
  const done = h('p', { role: 'status', id: 'action-result' });
  const can = mayOperate(job.group);
  const act = (label, fn, cls, attrs) => h('button', { type: 'button', class: cls, disabled: !can, ...attrs, onclick: async () => {
    try { await fn(); } catch (e) { showBanner(err, e); }
  } }, label);
  const params = input('', { placeholder: t('job.runParams'), 'aria-label': t('job.runParams') });
  // Trigger once on chosen executors of the group (none chosen: the group).
  const executors = h('fieldset', { class: 'groups', id: 'run-executors', hidden: true }, h('legend', {}, t('job.runOn')));
  const chooseExecutors = act(t('job.chooseExecutors'), async () => {
    const list = await api('GET', `/api/v1/executors${query({ group: job.group })}`);
    executors.replaceChildren(h('legend', {}, t('job.runOn')),
      ...list.filter((e) => e.state === 'live').map((e) => {
        const cb = h('input', { type: 'checkbox', value: e.id, id: `run-${e.id}` });
        return h('label', { for: cb.id, translate: 'no' }, cb, ` ${e.id}`);
      }));
    if (!list.some((e) => e.state === 'live')) executors.append(h('span', { class: 'muted' }, t('job.noLiveExecutor')));
    executors.hidden = false;
  }, undefined, { 'aria-controls': 'run-executors' });
  const logs = link(`/logs${query({ job_id: job.id })}`, t('nav.logs'));
  // A viewer is shown no write control (the API would refuse it anyway).
  if (!can) return h('div', {}, h('div', { class: 'actions' }, logs));
  return h('div', {},
    h('div', { class: 'actions' },
      job.enabled
        ? act(t('job.stop'), async () => { await api('POST', `/api/v1/jobs/${job.id}/stop`); navigate(location.pathname, true); })
        : act(t('job.start'), async () => { await api('POST', `/api/v1/jobs/${job.id}/start`); navigate(location.pathname, true); }),
      params,
      chooseExecutors,
      act(t('job.triggerOnce'), async () => {
        const body = {};
        if (params.value) body.params = params.value;
        const picked = [...executors.querySelectorAll('input:checked')].map((cb) => cb.value);
        if (picked.length) body.executors = picked;
        const tr = await api('POST', `/api/v1/jobs/${job.id}/trigger`, Object.keys(body).length ? body : undefined);
        const sent = (tr.triggers || []).find((r) => r.code === 200) || (tr.triggers || [])[0];
        if (sent && sent.code !== 200) throw Object.assign(new Error(sent.msg), { apiMessage: sent.msg, kind: 'not_sent' });
        navigate(sent ? `/logs/${encodeURIComponent(sent.trigger.trigger_id)}` : `/logs${query({ job_id: job.id })}`);
      }),
      act(t('job.killAll'), async () => {
        if (!confirm(t('job.killAllConfirm', { id: job.id }))) return;
        const k = await api('POST', `/api/v1/jobs/${job.id}/kill`);
        done.textContent = t('job.killAllDone', { killed: k.killed.length, failed: k.failed.length });
      }, 'danger', { id: 'kill-all' }),
      link(`/jobs/new${query({ copy: job.id })}`, t('job.copy')),
      logs,
      act(t('job.delete'), async () => {
        if (!confirm(t('job.deleteConfirm', { id: job.id, name: job.description || job.handler || '' }))) return;
        await api('DELETE', `/api/v1/jobs/${job.id}`);
        navigate('/jobs');
      }, 'danger')),
    executors, err, done);
}

/** The kept versions of a job's script. They are stored in MySQL by the
 *  persistence worker, behind the save: while the newest (the job's
 *  `glue_version`) is not there yet, the list says so and looks again.
 *  `edit` (for who may change the job) loads a version into the editor:
 *  saved, it becomes the newest version. */
async function scriptVersions(job, ctx, edit) {
  const box = h('section', { 'aria-labelledby': 'versions' });
  const shown = h('pre', { class: 'log', hidden: true, 'aria-label': t('script.difference'), translate: 'no' });
  const err = banner();
  const draw = async () => {
    const list = (await api('GET', `/api/v1/jobs/${job.id}/scripts`)).items;
    const newest = list.reduce((m, v) => Math.max(m, v.version), 0);
    const pending = newest < job.glue_version;
    box.replaceChildren(h('h2', { id: 'versions' }, t('script.versions')),
      h('p', { class: 'muted', role: 'status' }, pending ? t('script.storing', { version: job.glue_version }) : ''),
      err,
      h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, ...['script.version', 'job.remark', 'script.saved', ''].map((k) => h('th', { scope: 'col' }, k ? t(k) : '')))),
        h('tbody', {}, ...list.map((v) => h('tr', { dataset: { version: v.version } },
          h('td', {}, String(v.version)), h('td', { translate: 'no' }, v.glue_remark), h('td', {}, when(v.created_ms, job.zone)),
          h('td', { class: 'actions' },
            h('button', { type: 'button', onclick: () => { shown.textContent = diff(v.glue_source, job.glue_source); shown.hidden = false; } }, t('script.diff')),
            edit && v.version !== job.glue_version ? h('button', { type: 'button', onclick: () => edit(v) }, t('script.edit')) : null,
            mayOperate(job.group) && v.version !== job.glue_version ? h('button', { type: 'button', onclick: async () => {
              try {
                await api('POST', `/api/v1/jobs/${job.id}/scripts/${v.version}/restore`, { remark: t('script.restoredRemark', { version: v.version }) });
                navigate(location.pathname, true);
              } catch (e) { showBanner(err, e); }
            } }, t('script.restore')) : null)))))), shown);
    return pending;
  };
  if (await draw()) ctx.every(1000, draw);
  return box;
}

/** The fires the job missed: the count never run, and the last ones. */
async function missedFires(job) {
  const box = h('section', { 'aria-labelledby': 'missed', id: 'missed-fires' });
  const m = await api('GET', `/api/v1/jobs/${job.id}/misfires`);
  const heads = ['missed.detected', 'missed.first', 'missed.last', 'missed.count', 'missed.skipped', 'missed.cause', 'job.misfire', 'missed.fired'];
  box.append(h('h2', { id: 'missed' }, t('missed.title')),
    h('p', {}, t('missed.total', { count: m.skipped })),
    m.recent.length ? h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, ...heads.map((k) => h('th', { scope: 'col' }, t(k))))),
      h('tbody', {}, ...m.recent.map((r) => h('tr', {},
        h('td', {}, when(r.detected_ms, job.zone)), h('td', {}, when(r.first_ms, job.zone)), h('td', {}, when(r.last_ms, job.zone)),
        h('td', {}, String(r.count)), h('td', {}, String(r.skipped)),
        h('td', { dataset: { cause: r.cause }, title: t(`missed.cause.${r.cause}.hint`) }, t(`missed.cause.${r.cause}`)),
        h('td', {}, t(`choice.MISFIRE.${r.strategy}`)),
        h('td', {}, when(r.fired_ms, job.zone))))))) : h('p', { class: 'muted' }, t('missed.none')));
  return box;
}

/** Audit actions on a job that run it rather than change it. */
const RUNS = new Set(['trigger', 'kill']);

/** Every change of the job, newest first, field by field. */
async function changeHistory(job) {
  const box = h('section', { 'aria-labelledby': 'history', id: 'job-history' });
  const list = await api('GET', `/api/v1/jobs/${job.id}/history`);
  box.append(h('h2', { id: 'history' }, t('history.title')),
    list.items.length ? h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, ...['audit.when', 'users.user', 'audit.action', 'history.changes'].map((k) => h('th', { scope: 'col' }, t(k))))),
      h('tbody', {}, ...list.items.filter((r) => !RUNS.has(r.action.split('.').pop())).map((r) => h('tr', {},
        h('td', {}, when(r.at_ms, job.zone)), h('td', { translate: 'no' }, r.username),
        h('td', { translate: 'no' }, r.action),
        h('td', {}, r.changes ? changeList(r.changes) : '—')))))) : h('p', { class: 'muted' }, t('history.none')));
  return box;
}

/** Finds jobs by id, description or handler and adds them to the child
 *  jobs field (`control`, a comma-separated id list the API validates). */
function childPicker(control, self) {
  const ids = () => control.value.split(',').map((v) => v.trim()).filter(Boolean);
  const search = input('', { type: 'search', placeholder: t('job.findChild'), 'aria-label': t('job.findChildLabel'), autocomplete: 'off' });
  const found = h('ul', { class: 'picker', 'aria-live': 'polite', 'aria-label': t('job.jobsFound') });
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
          h('button', { type: 'button', 'aria-label': t('job.addChild', { id: j.id }), onclick: () => {
            const now = ids();
            if (!now.includes(String(j.id))) now.push(String(j.id));
            control.value = now.join(', ');
            control.dispatchEvent(new Event('input'));
          } }, t('job.add')),
          h('span', { translate: 'no' }, ` ${j.id} · ${j.description || j.handler} (${j.group})`))) : [h('li', { class: 'muted' }, t('jobs.none'))]));
      } catch (e) {
        found.replaceChildren(h('li', { class: 'field-error' }, ...errorNodes(e)));
      }
    }, 250);
  });
  return h('div', { class: 'picker-box' }, search, found);
}
