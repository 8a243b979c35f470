// The small pieces the screens share: selects and inputs with their
// explanations, status cells, times for inputs, the executors' table,
// group check boxes and the diff of two values.

import { query, h, link, field } from './ui.js';

export const values = (choices) => choices.map(([v]) => v);

/** A select of plain values or [value, label] pairs, showing the label. */
export function select(options, value) {
  return h('select', {}, ...options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value }, label);
  }));
}

/** A select of the API's values (choices.js), showing each value. */
export function choice(options, value) {
  return h('select', {}, ...options.map(([v]) => h('option', { value: v, selected: v === value }, v)));
}

/** A field for a `choice`, the chosen value's one-line explanation under
 *  it (its hint, which the control is described by). */
export function explained(label, name, control, options) {
  const explain = () => (options.find(([v]) => v === control.value) || [])[1] || '';
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
  return h('span', { class: `status ${cls}` }, text);
}

// ---- sign-in -----------------------------------------------------------

export function toMs(local) { return local ? new Date(local).getTime() : ''; }

export function toLocalInput(ms) {
  if (!ms) return '';
  const d = new Date(Number(ms));
  const pad = (v) => String(v).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** How long ago `ms` was, shortly. */
export function age(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

export function executorTable(list, withGroup) {
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

/** Checkboxes for the groups a user is granted. */
export function groupBoxes(all, granted, prefix) {
  const box = h('fieldset', { class: 'groups' }, h('legend', {}, 'Groups granted'));
  for (const g of all) {
    const cb = h('input', { type: 'checkbox', value: g, id: `${prefix}-${g}`, checked: granted.includes(g) });
    box.append(h('label', { for: cb.id }, cb, ` ${g}`));
  }
  if (!all.length) box.append(h('span', { class: 'muted' }, 'No group yet.'));
  box.granted = () => [...box.querySelectorAll('input:checked')].map((c) => c.value);
  return box;
}

/** A line diff (`-` old, `+` current) by longest common subsequence. */
export function diff(old, cur) {
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
