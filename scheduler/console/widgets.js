// The small pieces the screens share: selects and inputs with their
// explanations, status cells, times for inputs, the executors' table,
// group check boxes, the diff of two values and of a job's fields, and
// the date presets of the filters.

import { query, h, link, field } from './ui.js';
import { t } from './i18n.js';

/** A select of [value, label] pairs (the label from the catalogs) or of
 *  plain values (data, such as group names, shown as they are). */
export function select(options, value) {
  return h('select', {}, ...options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value, translate: Array.isArray(o) ? undefined : 'no' }, label);
  }));
}

/** A select of the API's values (a list of choices.js named `list`), each
 *  shown by its label in the language shown. */
export function choice(options, value, list) {
  return h('select', {}, ...options.map((v) => h('option', { value: v, selected: v === value }, t(`choice.${list}.${v}`))));
}

/** A field for a `choice`, the chosen value's one-line explanation under
 *  it (its hint, which the control is described by). */
export function explained(label, name, control, list) {
  const explain = () => t(`choice.${list}.${control.value}.hint`);
  const box = field(label, name, control, explain());
  control.addEventListener('change', () => { box.querySelector(`#hint-${name}`).textContent = explain(); });
  return box;
}

export function input(value, attrs) {
  return h('input', { value: value ?? '', ...attrs });
}

export function statusOf(row) {
  if (row.handle_code === 200) return ['success', 'ok'];
  if ((row.trigger_code !== null && row.trigger_code !== undefined && row.trigger_code !== 200)
      || (row.handle_code && row.handle_code !== 200)) return ['failure', 'bad'];
  return ['running', 'run'];
}

export function statusCell(row) {
  const [text, cls] = statusOf(row);
  return h('span', { class: `status ${cls}`, dataset: { status: text } }, t(`status.${text}`));
}

export function toMs(local) { return local ? new Date(local).getTime() : ''; }

export function toLocalInput(ms) {
  if (!ms) return '';
  const d = new Date(Number(ms));
  const pad = (v) => String(v).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A duration, shortly. */
export function age(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return t('unit.ms', { n: ms });
  if (ms < 120_000) return t('unit.s', { n: (ms / 1000).toFixed(1) });
  if (ms < 7_200_000) return t('unit.min', { n: Math.round(ms / 60_000) });
  return t('unit.h', { n: Math.round(ms / 3_600_000) });
}

export function executorTable(list, withGroup) {
  const state = (e) => h('span', { class: `status ${e.state === 'live' ? 'ok' : 'muted'}`, dataset: { state: e.state } }, t(`executor.state.${e.state}`));
  const heads = ['executor.executor', ...(withGroup ? ['common.group'] : []), 'executor.state', 'executor.heartbeat', 'executor.host', 'executor.handlers', 'executor.runningJobs'];
  return h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ...heads.map((k) => h('th', { scope: 'col' }, t(k))))),
    h('tbody', {}, list.length ? list.map((e) => h('tr', {},
      h('td', { translate: 'no' }, e.id),
      withGroup ? h('td', { translate: 'no' }, link(`/groups/${encodeURIComponent(e.group)}`, e.group)) : null,
      h('td', {}, state(e)),
      h('td', {}, e.last_seen_ms ? h('span', { title: new Date(e.last_seen_ms).toISOString() }, t('executor.ago', { age: age(e.age_ms) })) : '—'),
      h('td', { translate: 'no' }, e.host ? `${e.host}${e.pid ? ` (pid ${e.pid})` : ''}` : '—'),
      h('td', { translate: 'no' }, e.handlers.length ? e.handlers.join(', ') : '—'),
      h('td', {}, e.running_jobs.length
        ? e.running_jobs.flatMap((j, i) => [i ? ', ' : '', link(`/logs${query({ job_id: j, status: 'running' })}`, String(j))])
        : t('executor.idle')))) : h('tr', {}, h('td', { colspan: heads.length, class: 'muted' }, t('executor.none'))))));
}

/** Checkboxes for the groups a user is granted. */
export function groupBoxes(all, granted, prefix) {
  const box = h('fieldset', { class: 'groups' }, h('legend', {}, t('users.groupsGranted')));
  for (const g of all) {
    const cb = h('input', { type: 'checkbox', value: g, id: `${prefix}-${g}`, checked: granted.includes(g) });
    box.append(h('label', { for: cb.id, translate: 'no' }, cb, ` ${g}`));
  }
  if (!all.length) box.append(h('span', { class: 'muted' }, t('groups.none')));
  box.granted = () => [...box.querySelectorAll('input:checked')].map((c) => c.value);
  return box;
}

/** A line diff (`-` old, `+` current) by longest common subsequence. */
export function diff(old, cur) {
  const a = (old || '').split('\n'); const b = (cur || '').split('\n');
  const m = a.length; const n = b.length;
  if (m * n > 250000) return `(${t('script.tooLong')})\n--- ${t('script.version')}\n${old}\n+++ ${t('script.current')}\n${cur}`;
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


/** The date presets of a time filter (XXL-JOB's: today, yesterday, this
 *  month, last month, the last 7 and 30 days), each filling `from` and
 *  `until` (datetime-local inputs) in the browser's calendar. The API's
 *  `until_ms` is exclusive, so `until` is the first minute after the
 *  range (a day's end at 23:59 would leave out its last minute). */
export function datePresets(from, until) {
  const day = (offset) => { const d = new Date(); d.setHours(0, 0, 0, 0); d.setDate(d.getDate() + offset); return d; };
  const month = (offset) => { const d = day(0); d.setDate(1); d.setMonth(d.getMonth() + offset); return d; };
  const presets = [
    ['today', () => [day(0), day(1)]],
    ['yesterday', () => [day(-1), day(0)]],
    ['thisMonth', () => [month(0), month(1)]],
    ['lastMonth', () => [month(-1), month(0)]],
    ['last7', () => [day(-6), day(1)]],
    ['last30', () => [day(-29), day(1)]],
  ];
  return h('div', { class: 'presets', role: 'group', 'aria-label': t('preset.label') },
    h('span', { class: 'muted' }, t('preset.label')),
    ...presets.map(([name, range]) => h('button', { type: 'button', dataset: { preset: name }, onclick: () => {
      const [a, b] = range();
      from.value = toLocalInput(a.getTime());
      until.value = toLocalInput(b.getTime());
      from.form?.requestSubmit();
    } }, t(`preset.${name}`))));
}

/** The form's label of each field of a job, for its change history. */
const FIELD_LABELS = {
  group: 'common.group', description: 'jobs.description', owner: 'jobs.owner',
  schedule_type: 'job.scheduleType', schedule_conf: 'jobs.schedule', zone: 'job.zone',
  handler: 'jobs.handler', params: 'logs.params', routing: 'job.routing', block: 'job.block',
  misfire: 'job.misfire', misfire_threshold_ms: 'job.misfireThreshold', timeout_s: 'job.timeout',
  retries: 'job.retries', retry_backoff_s: 'job.retryBackoff', child_jobs: 'job.childJobs',
  alarm_email: 'job.alarmEmail', alarm_webhook: 'job.alarmWebhook', alarm_channels: 'job.alarmChannels',
  glue_type: 'job.scriptType', glue_source: 'job.script', glue_remark: 'job.remark',
  enabled: 'job.enabled', secrets: 'job.secrets',
};

/** A job's change as the audit keeps it ({field: [before, after]}): one
 *  line per field, its label and its name, the values as the API stored
 *  them. A long record (a new or restored job) is folded. */
export function changeList(changes) {
  const empty = (v) => v === null || v === undefined || v === '' || (Array.isArray(v) && !v.length)
    || (typeof v === 'object' && !Array.isArray(v) && v !== null && !Object.keys(v).length);
  const show = (v) => (empty(v) ? '—' : typeof v === 'string' ? v : JSON.stringify(v));
  // A field that went from nothing to nothing (a new job's empty fields)
  // says nothing.
  const entries = Object.entries(changes).filter(([, pair]) =>
    !(Array.isArray(pair) && pair.length === 2 && show(pair[0]) === show(pair[1])));
  if (!entries.length) return h('span', { class: 'muted' }, t('history.noFieldChanged'));
  const list = h('ul', { class: 'changes' }, ...entries.map(([name, pair]) => {
    const [before, after] = Array.isArray(pair) && pair.length === 2 ? pair : [undefined, pair];
    return h('li', { dataset: { field: name } }, FIELD_LABELS[name] ? `${t(FIELD_LABELS[name])} ` : '',
      h('code', { translate: 'no' }, name), ': ',
      h('del', { translate: 'no' }, show(before)), ' → ', h('ins', { translate: 'no' }, show(after)));
  }));
  if (entries.length <= 6) return list;
  return h('details', { class: 'fields' }, h('summary', {}, t('history.fields', { count: entries.length })), list);
}
