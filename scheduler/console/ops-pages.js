// The operator's screens (admins): the alarm channels job failures go to,
// log retention, and the jobs deleted (restored from their last state).
// Every text is the catalog's (`ops.*`); what the API holds (names, URLs,
// users) is shown as it is, marked `translate="no"`.

import { api, query, h, link, when, field, showError, banner, navigate, isAdmin } from './ui.js';
import { t } from './i18n.js';
import { select, input } from './widgets.js';

/** The channel kinds (the API's `kind` values, model ChannelKind). */
const KINDS = ['dingtalk', 'wecom', 'feishu', 'slack', 'json'];

/** The kinds whose vendor signs a robot's messages with a secret. */
const SIGNS = new Set(['dingtalk', 'feishu']);

/** What a template may hold (model TEMPLATE_FIELDS). */
const PLACEHOLDERS = ['job_id', 'job', 'group', 'handler', 'trigger_id', 'fire_time', 'executor',
  'code', 'msg', 'retry_count', 'failures', 'link'];

/** A stored secret, as an answer shows it (and a request keeps it by). */
const MASK = '***';

/** A value of the API's, shown as it is. */
const data = (text) => h('span', { translate: 'no' }, text);

/** The text of `key`, each `{param}` the node (or text) `params` gives:
 *  data within a translated sentence. */
function parts(key, params) {
  return t(key).split(/(\{\w+\})/).filter(Boolean).map((piece) => {
    const m = piece.match(/^\{(\w+)\}$/);
    return m && m[1] in params ? params[m[1]] : piece;
  });
}

/** A table's head: a key's text each ('' an empty one, null none). */
const heads = (...keys) => h('thead', {}, h('tr', {},
  ...keys.filter((k) => k !== null).map((k) => h('th', { scope: 'col' }, k ? t(k) : ''))));

// ---- alarm channels ----------------------------------------------------

export async function channels(main) {
  main.append(h('h1', {}, t('ops.channels.title')), h('p', { class: 'muted' }, t('ops.channels.intro')));
  const list = await api('GET', '/api/v1/alarm-channels');
  const admin = isAdmin();
  const err = banner();
  const table = h('div', { class: 'table-wrap' }, h('table', {},
    heads('ops.channels.name', 'ops.channels.kind', 'ops.channels.url', 'ops.channels.signed', 'ops.channels.changed', admin ? '' : null),
    h('tbody', {}, list.length ? list.map((c, i) => {
      // The delete button's name is its text and the channel's (marked
      // as data where it is shown).
      const row = h('tr', {},
        h('td', { translate: 'no', id: `channel-${i}` }, link(`/channels/${encodeURIComponent(c.name)}`, c.name)),
        h('td', {}, kindLabel(c.kind)),
        h('td', { translate: 'no' }, h('code', {}, c.url)),
        h('td', {}, c.secret ? t('ops.channels.yes') : t('ops.channels.no')),
        h('td', {}, when(c.updated_ms)),
        admin ? h('td', {}, h('button', {
          type: 'button', class: 'danger', id: `delete-${i}`, 'aria-labelledby': `delete-${i} channel-${i}`,
          onclick: async () => {
            if (!confirm(t('ops.channels.confirmDelete', { name: c.name }))) return;
            try { await api('DELETE', `/api/v1/alarm-channels/${encodeURIComponent(c.name)}`); row.remove(); } catch (e) { showError(table, err, e); }
          },
        }, t('ops.channels.delete'))) : null);
      return row;
    }) : h('tr', {}, h('td', { colspan: admin ? 6 : 5, class: 'muted' }, t('ops.channels.none'))))));
  main.append(table, err);
  if (!admin) return;
  main.append(h('h2', {}, t('ops.channels.new')), channelForm(null));
}

export async function channelScreen(main, { name }) {
  const channelName = decodeURIComponent(name);
  const c = await api('GET', `/api/v1/alarm-channels/${encodeURIComponent(channelName)}`);
  main.append(h('h1', {}, ...parts('ops.channels.heading', { name: data(c.name) })),
    h('p', { class: 'muted' }, ...parts('ops.channels.changedAt', { when: when(c.updated_ms) }), ' · ',
      link('/channels', t('ops.channels.back'))),
    channelForm(c));
}

function kindLabel(kind) {
  return KINDS.includes(kind) ? t(`ops.kind.${kind}`) : data(kind);
}

/** The form of a new channel (`c` null) or of `c`: the fields its kind
 *  takes, the template's placeholders. Read only but for admins. */
function channelForm(c) {
  const admin = isAdmin();
  const err = banner();
  const name = input(c ? c.name : '', { required: true, autocomplete: 'off', maxlength: 64, pattern: '[A-Za-z0-9_\\-]{1,64}', translate: 'no' });
  const kind = select(KINDS.map((k) => [k, t(`ops.kind.${k}`)]), c ? c.kind : 'dingtalk');
  const url = input(c ? c.url : '', { type: 'url', required: true, maxlength: 1024, autocomplete: 'off', translate: 'no' });
  const stored = Boolean(c && c.secret);
  const secret = input('', {
    type: 'password', autocomplete: 'new-password', maxlength: 256,
    placeholder: stored ? t('ops.channels.secretKept') : null,
  });
  const remove = h('input', { type: 'checkbox', id: 'f-remove-secret' });
  const template = h('textarea', { rows: 6, maxlength: 4096, dataset: { wide: '1' }, translate: 'no' }, c ? c.template : '');
  const kindField = field(t('ops.channels.kind'), 'kind', kind, t(`ops.kindHint.${kind.value}`));
  const secretField = field(t('ops.channels.secret'), 'secret', secret, t('ops.channels.secretHint'));
  if (stored) {
    secretField.append(h('label', { for: remove.id }, remove, ' ', t('ops.channels.secretRemove')));
    remove.addEventListener('change', () => { secret.disabled = remove.checked; });
  }
  const shown = () => {
    kindField.querySelector('#hint-kind').textContent = t(`ops.kindHint.${kind.value}`);
    url.placeholder = t(`ops.urlExample.${kind.value}`);
    secretField.hidden = !SIGNS.has(kind.value);
  };
  kind.addEventListener('change', shown);
  shown();
  const hint = [t('ops.channels.templateHint'), ' ',
    ...PLACEHOLDERS.flatMap((p, i) => [i ? ' ' : '', h('code', { translate: 'no' }, `{${p}}`)])];
  const meanings = h('details', { class: 'wide' }, h('summary', {}, t('ops.channels.placeholders')),
    h('dl', { class: 'facts' }, ...PLACEHOLDERS.flatMap((p) => [h('dt', { translate: 'no' }, h('code', {}, `{${p}}`)), h('dd', {}, t(`ops.placeholder.${p}`))])));

  const body = () => {
    const out = { kind: kind.value, url: url.value.trim(), template: template.value };
    if (!c) out.name = name.value.trim();
    if (!SIGNS.has(kind.value)) {
      // A kind that signs nothing takes no secret: a stored one goes.
      if (stored) out.secret = '';
    } else if (stored && remove.checked) {
      out.secret = '';
    } else if (secret.value) {
      out.secret = secret.value;
    } else if (stored) {
      out.secret = MASK;
    }
    return out;
  };
  const buttons = admin ? h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, c ? t('common.save') : t('ops.channels.create')),
    c ? h('button', { type: 'button', class: 'danger', onclick: async () => {
      if (!confirm(t('ops.channels.confirmDelete', { name: c.name }))) return;
      try {
        await api('DELETE', `/api/v1/alarm-channels/${encodeURIComponent(c.name)}`);
        navigate('/channels');
      } catch (e) { showError(form, err, e); }
    } }, t('ops.channels.delete')) : null) : null;
  const form = h('form', {
    class: 'form', 'aria-label': c ? t('ops.channels.editLabel') : t('ops.channels.new'),
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        if (c) await api('PUT', `/api/v1/alarm-channels/${encodeURIComponent(c.name)}`, body());
        else await api('POST', '/api/v1/alarm-channels', body());
        navigate('/channels', !c);
      } catch (e2) { showError(form, err, e2); }
    },
  },
  c ? null : field(t('ops.channels.name'), 'name', name, t('ops.channels.nameHint')),
  kindField,
  field(t('ops.channels.url'), 'url', url, t('ops.channels.urlHint')),
  secretField,
  field(t('ops.channels.template'), 'template', template, hint),
  meanings,
  h('div', { class: 'wide' }, err, buttons));
  if (!admin) for (const control of form.querySelectorAll('input, select, textarea')) control.disabled = true;
  return form;
}

// ---- log retention -----------------------------------------------------

export async function retention(main) {
  main.append(h('h1', {}, t('ops.retention.title')), h('p', { class: 'muted' }, t('ops.retention.intro')));
  let conf = null;
  const configured = h('p', {});
  try {
    conf = await api('GET', '/api/v1/maintenance/retention');
    configured.textContent = conf.days >= conf.min_days
      ? t('ops.retention.configured', { days: conf.days })
      : t('ops.retention.configuredOff', { min: conf.min_days });
  } catch (e) {
    if (e.status === 401) throw e;
    configured.textContent = t('ops.retention.configuredUnknown');
    configured.className = 'muted';
  }
  main.append(configured);
  const min = conf ? conf.min_days : 7;
  const max = conf ? conf.max_days : 36500;
  const err = banner();
  const result = h('div', { role: 'status' });
  const days = input(conf && conf.days >= min ? conf.days : '', { type: 'number', min, max, step: 1, required: true });
  const apply = h('button', { type: 'submit', class: 'danger' }, t('ops.retention.apply'));
  const form = h('form', {
    class: 'form', 'aria-label': t('ops.retention.formLabel'),
    onsubmit: async (e) => {
      e.preventDefault();
      const n = Number(days.value);
      if (!confirm(t('ops.retention.confirm', { days: n }))) return;
      apply.disabled = true;
      result.replaceChildren(h('p', { class: 'muted' }, t('ops.retention.applying')));
      try {
        const done = await api('POST', '/api/v1/maintenance/retention', { days: n });
        for (const spot of form.querySelectorAll('.field-error')) spot.textContent = '';
        err.hidden = true;
        result.replaceChildren(...applied(done));
      } catch (e2) {
        result.replaceChildren();
        showError(form, err, e2);
      } finally {
        apply.disabled = false;
      }
    },
  },
  field(t('ops.retention.days'), 'days', days, t('ops.retention.daysHint', { min, max })),
  h('div', { class: 'wide' }, err, h('div', { class: 'actions' }, apply)));
  if (!isAdmin()) for (const control of form.querySelectorAll('input, button')) control.disabled = true;
  main.append(h('h2', {}, t('ops.retention.applyNow')), form, result);
}

/** What one application of retention dropped (history Retention). */
function applied(r) {
  if (!r.enabled) return [h('p', {}, t('ops.retention.nothing', { days: r.days }))];
  const rows = r.dropped.reduce((sum, d) => sum + d.rows, 0);
  const days = r.dropped.reduce((most, d) => Math.max(most, d.partitions.length), 0);
  const done = h('p', {}, ...parts('ops.retention.done', { days: r.days, cutoff: when(r.cutoff_ms) }));
  if (!rows && !days) return [done, h('p', {}, t('ops.retention.none'))];
  return [
    done,
    h('p', {}, t('ops.retention.total', { rows, days })),
    h('div', { class: 'table-wrap' }, h('table', {},
      heads('ops.retention.table', 'ops.retention.partitions', 'ops.retention.rows'),
      h('tbody', {}, r.dropped.map((d) => h('tr', {},
        h('td', { translate: 'no' }, h('code', {}, d.table)),
        h('td', { translate: 'no' }, d.partitions.length ? d.partitions.join(', ') : '—'),
        h('td', {}, String(d.rows))))))),
  ];
}

// ---- deleted jobs ------------------------------------------------------

export async function deleted(main) {
  main.append(h('h1', {}, t('ops.deleted.title')), h('p', { class: 'muted' }, t('ops.deleted.intro')));
  const list = await api('GET', `/api/v1/audit${query({ action: 'job.delete', limit: 100 })}`);
  // The newest deletion of each job (one deleted, restored and deleted
  // again has two).
  const seen = new Set();
  const items = list.items.filter((a) => {
    const m = /^job:(\d+)$/.exec(a.target);
    if (!m || seen.has(m[1])) return false;
    seen.add(m[1]);
    a.jobId = m[1];
    return true;
  });
  // Whether each is back: restored since its deletion, as the audit says
  // (one read for every row; the action is the API's name, not a catalog
  // key, hence not quoted as one).
  const oldest = items.reduce((m, a) => Math.min(m, a.at_ms), Infinity);
  const restores = items.length
    ? (await api('GET', `/api/v1/audit${query({ action: `job.restore`, since_ms: oldest, limit: 1000 })}`)).items
    : [];
  const restoredAt = new Map();
  for (const r of restores) restoredAt.set(r.target, Math.max(restoredAt.get(r.target) ?? -Infinity, r.at_ms));
  const back = items.map((a) => (restoredAt.get(a.target) ?? -Infinity) >= a.at_ms);
  const admin = isAdmin();
  const err = banner();
  const restored = (id) => h('span', { class: 'actions' },
    h('span', { class: 'ok' }, t('ops.deleted.restored')), link(`/jobs/${id}`, t('ops.deleted.open', { id })));
  const table = h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, list.items.length === 100 ? t('ops.deleted.newest') : t('ops.deleted.count', { count: items.length })),
    heads('ops.deleted.when', 'ops.deleted.by', 'ops.deleted.job', 'ops.deleted.group', ''),
    h('tbody', {}, items.length ? items.map((a, i) => {
      const cell = h('td', {});
      if (back[i]) cell.append(restored(a.jobId));
      else if (admin) {
        const button = h('button', {
          type: 'button', 'aria-label': t('ops.deleted.restoreLabel', { id: a.jobId }),
          onclick: async () => {
            button.disabled = true;
            try {
              await api('POST', `/api/v1/jobs/${a.jobId}/restore`);
              err.hidden = true;
              cell.replaceChildren(restored(a.jobId));
              cell.querySelector('a').focus();
            } catch (e) {
              button.disabled = false;
              showError(table, err, e);
            }
          },
        }, t('ops.deleted.restore'));
        cell.append(button);
      }
      return h('tr', {},
        h('td', {}, when(a.at_ms)),
        h('td', { translate: 'no' }, a.username),
        h('td', {}, link(`/audit${query({ target: a.target })}`, data(a.jobId))),
        h('td', { translate: 'no' }, a.group || ''),
        cell);
    }) : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, t('ops.deleted.none'))))));
  main.append(err, table);
}
