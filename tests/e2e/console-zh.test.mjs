// The console in Chinese, as XXL-JOB's users use it every day, in Debian's
// chromium whose language is zh-CN: the catalogs complete in all three
// languages, every screen without a string from outside them (and a
// screenshot of each, zh-CN-*.png), the language remembered per user, an
// API error in Chinese beside its field, and the daily tools: the dashboard's
// range, the owner filter and "my jobs", missed fires, a job's change
// history (on the job and in the audit), a trigger on a chosen executor,
// a kill from the log list and a kill of every run, a log clean with a
// preset, a deleted job restored, times in the job's zone, the log
// filter's date presets, retention applied, and the script editor
// (highlighting, an old version edited, the starter templates). Runs after console.test.mjs, on the
// group it created.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, ADMIN, APP, launch, getJson, writeOk, shot, until, served, catalogs, assertAllTranslated } from './helpers.mjs';

const fill = (text, params) => text.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
const placeholders = (text) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

/** The catalog keys a console module names literally: t('key') calls
 *  and 'family.key' strings passed on to t. */
function keysNamedIn(source) {
  const out = new Set();
  for (const m of source.matchAll(/\bt\('([^']+)'/g)) out.add(m[1]);
  for (const m of source.matchAll(/'((?:nav|error|common|unit|filter|preset|status|login|account|users|audit|history|groups|executor|cluster|dashboard|logs|alarm|clean|jobs|job|script|missed|channel|ops|editor)\.[A-Za-z0-9_.]+)'/g)) out.add(m[1]);
  return out;
}

test('the catalogs: every key in all three languages, every key the console names', { timeout: 60_000 }, async () => {
  const browser = await launch();
  try {
    const page = await (await browser.newContext()).newPage();
    const cats = await catalogs(page);
    const en = Object.keys(cats.en);
    assert.ok(en.length > 300, `the English catalog has ${en.length} keys`);
    for (const lang of ['zh-CN', 'zh-TW']) {
      const keys = Object.keys(cats[lang]);
      assert.deepEqual(en.filter((k) => !(k in cats[lang])), [], `keys missing from ${lang}`);
      assert.deepEqual(keys.filter((k) => !(k in cats.en)), [], `keys of ${lang} that English lacks`);
      for (const k of en) {
        assert.deepEqual(placeholders(cats[lang][k]), placeholders(cats.en[k]), `${lang} ${k}: the same {placeholders}`);
        assert.ok(cats[lang][k].trim(), `${lang} ${k} is not empty`);
      }
    }
    // Each module of the console, as served (followed from app.js by its
    // imports), names only keys the catalogs hold.
    const seen = new Set();
    const queue = ['app.js'];
    const named = new Set();
    while (queue.length) {
      const file = queue.shift();
      if (seen.has(file)) continue;
      seen.add(file);
      const text = await (await page.request.get(`${BASE}/assets/${file}`)).text();
      for (const m of text.matchAll(/from '\.\/([\w.-]+\.js)'/g)) queue.push(m[1]);
      if (!file.startsWith('messages-')) for (const k of keysNamedIn(text)) named.add(k);
    }
    assert.ok(seen.has('jobs-pages.js') && seen.has('ops-pages.js') && seen.has('editor.js'), [...seen].join(' '));
    assert.deepEqual([...named].filter((k) => !(k in cats.en)), [], 'keys the console names that no catalog holds');
    // The keys made from the API's values: every choice with its hint.
    const choices = await served(page, 'choices.js');
    for (const list of ['SCHEDULE_TYPES', 'ROUTING', 'BLOCK', 'MISFIRE', 'GLUE', 'ROLES']) {
      for (const v of choices[list]) {
        for (const k of [`choice.${list}.${v}`, `choice.${list}.${v}.hint`]) assert.ok(k in cats.en, `${k} is in the catalogs`);
      }
    }
    for (const k of ['error.invalid_input', 'error.not_found', 'error.conflict', 'error.unauthenticated', 'error.forbidden',
      'error.too_many_requests', 'error.stale_term', 'error.unavailable', 'error.internal']) assert.ok(k in cats.en, k);
  } finally {
    await browser.close();
  }
});

test('the console in zh-CN: every screen translated, and the daily tools', { timeout: 300_000 }, async () => {
  const browser = await launch();
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Asia/Shanghai', locale: 'zh-CN' });
    const page = await context.newPage();
    const scriptErrors = [];
    page.on('pageerror', (e) => scriptErrors.push(e));
    const dialogs = [];
    page.on('dialog', (d) => { dialogs.push(d.message()); d.accept(); });
    await page.goto(`${BASE}/login`);
    const cats = await catalogs(page);
    const zh = cats['zh-CN'];
    const T = (key, params) => fill(zh[key], params || {});
    /** Checks the screen shown and saves its screenshot. */
    const screen = async (name) => {
      await page.locator('#main > .view').waitFor();
      await assertAllTranslated(page, zh, name);
      await shot(page, `zh-CN-${name}`);
    };

    // The browser's language is the console's before anyone signs in.
    await page.locator('html[lang="zh-CN"]').waitFor();
    await page.getByRole('button', { name: T('login.submit') }).waitFor();
    await screen('01-login');
    await page.getByLabel(T('login.username'), { exact: true }).fill(ADMIN[0]);
    await page.getByLabel(T('login.password'), { exact: true }).fill(ADMIN[1]);
    await page.getByRole('button', { name: T('login.submit') }).click();
    await page.getByRole('navigation', { name: T('nav.main') }).waitFor();
    const me = (await getJson(page, '/api/v1/auth/me')).username;

    // What the steps below work on, made through the API.
    const now = Date.now();
    const job = (spec) => writeOk(page, 'POST', '/api/v1/jobs', { group: APP, handler: 'demo', schedule_type: 'NONE', ...spec });
    await job({ description: '爱丽丝的任务', owner: 'alice' });
    const mine = await job({ description: '我自己的任务', owner: me });
    const late = await job({ description: '错过调度的任务', schedule_type: 'CRON', schedule_conf: '0 * * * * ?', enabled: false, owner: me });
    await writeOk(page, 'POST', `/api/v1/jobs/${late.id}/start`, { from_ms: now - 3_600_000 });
    const sleeper = await job({ description: '长时间脚本', glue_type: 'GLUE_SHELL', glue_source: 'sleep 300\n', handler: undefined });
    const doomed = await job({ description: '将被删除的任务' });
    const tokyo = await job({ description: '东京时间的任务', schedule_type: 'CRON', schedule_conf: '0 0 9 * * ?', zone: 'Asia/Tokyo' });
    const firstScript = 'echo first\n';
    const scripted = await job({ description: '脚本编辑器', glue_type: 'GLUE_SHELL', glue_source: firstScript, handler: undefined });
    const secondScript = '# second version\necho "hello $HOME"\nexit 3\n';
    await writeOk(page, 'PUT', `/api/v1/jobs/${scripted.id}`, { glue_source: secondScript, glue_remark: 'v2' });
    await writeOk(page, 'POST', '/api/v1/alarm-channels', { name: 'ding-ops', kind: 'dingtalk', url: 'https://oapi.dingtalk.com/robot/send?access_token=abc', secret: 'SECabc' });

    // The dashboard: a range chosen by its preset, its totals and days as
    // the report counts them.
    await page.goto(`${BASE}/`);
    await page.locator('#report-days tbody tr').first().waitFor();
    await screen('02-dashboard');
    await page.getByRole('button', { name: T('dashboard.last30') }).click();
    await page.waitForURL(/[?&]from=\d{4}-\d\d-\d\d/);
    const range = new URL(page.url()).searchParams;
    const report = await getJson(page, `/api/v1/reports?from=${range.get('from')}&to=${range.get('to')}`);
    assert.equal(report.items.length, 30, 'thirty days');
    await until(page, 'the 30 days shown', async () => (await page.locator('#report-days tbody tr').count()) === 30, { reload: false });
    const shownTotal = async (id) => Number(await page.locator(`#${id} .value`).textContent());
    assert.equal(await shownTotal('total-success'), report.total.success_count);
    assert.equal(await shownTotal('total-failure'), report.total.fail_count);

    // The owner filter, and "my jobs".
    await page.goto(`${BASE}/jobs`);
    await page.getByRole('link', { name: '爱丽丝的任务' }).waitFor();
    await screen('03-jobs');
    await page.getByRole('button', { name: T('jobs.myJobs') }).click();
    await page.waitForURL(new RegExp(`[?&]owner=${me}(&|$)`));
    await page.getByRole('link', { name: '我自己的任务' }).waitFor();
    assert.equal(await page.getByRole('link', { name: '爱丽丝的任务' }).count(), 0, "alice's job is not mine");
    assert.equal(await page.getByRole('button', { name: T('jobs.myJobs') }).getAttribute('aria-pressed'), 'true');
    await page.getByLabel(T('jobs.owner'), { exact: true }).fill('alice');
    await page.getByRole('button', { name: T('jobs.searchButton') }).click();
    await page.waitForURL(/[?&]owner=alice(&|$)/);
    await page.getByRole('link', { name: '爱丽丝的任务' }).waitFor();
    assert.equal(await page.getByRole('link', { name: '我自己的任务' }).count(), 0);

    // A job started an hour back: the fires it missed, on its page.
    await page.goto(`${BASE}/jobs/${late.id}`);
    await until(page, 'the missed fires shown', async () => {
      await page.locator('#missed-fires').waitFor();
      return (await page.locator('#missed-fires td[data-cause="MISFIRE"]').count()) > 0;
    });
    await page.locator('#missed-fires').getByText(T('missed.cause.MISFIRE')).first().waitFor();
    await screen('04-job-missed-fires');

    // A change of the job is kept field by field: on its page, and as
    // the audit's detail.
    await page.goto(`${BASE}/jobs/${mine.id}`);
    await page.getByLabel(T('jobs.description'), { exact: true }).fill('我自己的任务（已修改）');
    await page.getByRole('button', { name: T('common.save') }).click();
    const change = page.locator('#job-history ul.changes li').filter({ hasText: 'description' })
      .filter({ has: page.locator('ins', { hasText: '我自己的任务（已修改）' }) });
    await until(page, 'the change in the history', async () => {
      await page.locator('#job-history').waitFor();
      return (await change.count()) > 0;
    });
    assert.equal(await change.first().locator('del').textContent(), '我自己的任务');
    await screen('05-job-history');
    await page.goto(`${BASE}/audit?target=job:${mine.id}&action=job.update`);
    const audited = page.locator('ul.changes li').filter({ hasText: 'description' }).first();
    await audited.waitFor();
    assert.equal(await audited.locator('ins').textContent(), '我自己的任务（已修改）');
    await screen('06-audit-diff');

    // An API refusal: its sentence in Chinese beside the field, the API's
    // own English after it.
    await page.goto(`${BASE}/jobs/${mine.id}`);
    await page.getByLabel(T('job.zone'), { exact: true }).fill('Mars/Olympus_Mons');
    await page.getByRole('button', { name: T('common.save') }).click();
    await page.locator('#err-zone').getByText(T('error.invalid_input')).waitFor();
    assert.match(await page.locator('#err-zone .api-message[lang="en"]').textContent(), /zone|Mars/i);
    await screen('07-job-field-error');

    // Trigger once on a chosen executor: it runs there.
    await page.goto(`${BASE}/jobs/${mine.id}`);
    await page.getByRole('button', { name: T('job.chooseExecutors') }).click();
    await page.getByLabel('web-2', { exact: true }).check();
    await page.getByRole('button', { name: T('job.triggerOnce') }).click();
    await page.waitForURL(/\/logs\/[^/?]+$/);
    const triggerId = decodeURIComponent(page.url().split('/').pop());
    await until(page, 'the trigger run on web-2', async () => {
      const r = await page.request.get(`${BASE}/api/v1/logs/${encodeURIComponent(triggerId)}`);
      return r.ok() && (await r.json()).log?.handle_code === 200;
    }, { reload: false });
    assert.equal((await getJson(page, `/api/v1/logs/${encodeURIComponent(triggerId)}`)).log.executor_id, 'web-2');
    await page.reload();
    await page.locator('dl.facts .status[data-status="success"]').waitFor();
    await screen('08-trigger');

    // A kill from the log list.
    const running = async () => (await getJson(page, `/api/v1/logs?job_id=${sleeper.id}&status=running`)).items;
    await writeOk(page, 'POST', `/api/v1/jobs/${sleeper.id}/trigger`);
    // Running on an executor, as the executors' registry says.
    const onExecutor = async () => (await getJson(page, `/api/v1/executors?group=${APP}`)).some((e) => e.running_jobs.includes(sleeper.id));
    await until(page, 'the script running', async () => (await running()).length === 1 && onExecutor(), { reload: false });
    const [first] = await running();
    await page.goto(`${BASE}/logs?job_id=${sleeper.id}`);
    await screen('09-logs');
    await page.getByRole('button', { name: T('logs.killTrigger', { id: first.trigger_id }) }).click();
    await page.getByText(T('logs.killSent'), { exact: true }).waitFor();
    await until(page, 'the killed trigger ended', async () => (await running()).length === 0, { reload: false });

    // Kill all: a running run and the one queued behind it both end.
    await writeOk(page, 'POST', `/api/v1/jobs/${sleeper.id}/trigger`);
    await writeOk(page, 'POST', `/api/v1/jobs/${sleeper.id}/trigger`);
    await until(page, 'two runs in flight, one running', async () => (await running()).length === 2 && onExecutor(), { reload: false });
    await page.goto(`${BASE}/jobs/${sleeper.id}`);
    await page.getByRole('button', { name: T('job.killAll') }).click();
    await page.locator('#action-result').filter({ hasText: T('job.killAllDone', { killed: 2, failed: 0 }) }).waitFor();
    await until(page, 'both runs ended', async () => (await running()).length === 0, { reload: false });
    const ended = (await getJson(page, `/api/v1/logs?job_id=${sleeper.id}`)).items;
    assert.equal(ended.length, 3);
    assert.ok(ended.every((r) => r.handle_code !== null && r.handle_code !== 200), 'every run killed');
    await screen('10-job-script-editor');

    // A log clean with a preset: all of the job's logs.
    await page.goto(`${BASE}/logs?job_id=${sleeper.id}`);
    await page.getByText(T('clean.title')).click();
    await page.getByLabel(T('clean.rule'), { exact: true }).selectOption('9');
    await screen('11-logs-clean');
    await page.getByRole('button', { name: T('clean.submit'), exact: true }).click();
    await page.locator('#clean-result').filter({ hasText: T('clean.done', { count: 3 }) }).waitFor();
    assert.equal((await getJson(page, `/api/v1/logs?job_id=${sleeper.id}`)).items.length, 0, 'the logs are gone');
    await until(page, 'the clean audited', async () =>
      (await getJson(page, '/api/v1/audit?action=logs.clean')).items.some((a) => a.target === `job:${sleeper.id}`), { reload: false });

    // A deleted job, restored from the deleted jobs' page.
    await page.goto(`${BASE}/jobs/${doomed.id}`);
    await page.getByRole('button', { name: T('job.delete') }).click();
    await page.waitForURL(`${BASE}/jobs`);
    assert.equal((await page.request.get(`${BASE}/api/v1/jobs/${doomed.id}`)).status(), 404);
    await page.goto(`${BASE}/deleted`);
    await screen('12-deleted-jobs');
    await page.getByRole('button', { name: T('ops.deleted.restoreLabel', { id: doomed.id }) }).click();
    await page.getByRole('link', { name: T('ops.deleted.open', { id: doomed.id }) }).waitFor();
    const back = await getJson(page, `/api/v1/jobs/${doomed.id}`);
    assert.deepEqual([back.description, back.enabled], ['将被删除的任务', false]);

    // Times in the job's zone, written as the language writes them: the
    // browser is in Shanghai (UTC+8), the job at 09:00 in Tokyo (UTC+9).
    await page.goto(`${BASE}/jobs/${tokyo.id}`);
    const nextShown = page.locator('p.muted', { hasText: T('job.nextFire') }).locator('time').first();
    await nextShown.waitFor();
    const next = (await getJson(page, `/api/v1/jobs/${tokyo.id}`)).next_fire_ms;
    assert.equal(await nextShown.getAttribute('datetime'), new Date(next).toISOString());
    const inTokyo = new Date(next + 9 * 3_600_000);
    const pad = (n) => String(n).padStart(2, '0');
    const tokyoDate = `${inTokyo.getUTCFullYear()}/${pad(inTokyo.getUTCMonth() + 1)}/${pad(inTokyo.getUTCDate())}`;
    const nextText = await nextShown.textContent();
    for (const part of [tokyoDate, '09:00:00', 'GMT+9']) assert.ok(nextText.includes(part), `${part}: Tokyo's, as zh-CN writes it: ${nextText}`);
    assert.ok(!nextText.includes('08:00:00'), `not the browser's zone: ${nextText}`);

    // The log filter's date presets, in the browser's calendar (Shanghai
    // has no daylight saving): today's range holds the trigger run above,
    // yesterday's does not.
    const DAY = 86_400_000;
    const EAST8 = 8 * 3_600_000;
    const firedAt = (await getJson(page, `/api/v1/logs/${encodeURIComponent(triggerId)}`)).log.fire_ms;
    // The range a preset should give when clicked at `now` (ms).
    const dayStart = (now) => Math.floor((now + EAST8) / DAY) * DAY - EAST8;
    const monthStart = (now, offset) => {
      const local = new Date(now + EAST8);
      return Date.UTC(local.getUTCFullYear(), local.getUTCMonth() + offset, 1) - EAST8;
    };
    const expected = {
      'preset.today': (now) => [dayStart(now), dayStart(now) + DAY],
      'preset.yesterday': (now) => [dayStart(now) - DAY, dayStart(now)],
      'preset.thisMonth': (now) => [monthStart(now, 0), monthStart(now, 1)],
      'preset.lastMonth': (now) => [monthStart(now, -1), monthStart(now, 0)],
      'preset.last7': (now) => [dayStart(now) - 6 * DAY, dayStart(now) + DAY],
    };
    for (const [key, rangeAt] of Object.entries(expected)) {
      await page.goto(`${BASE}/logs?job_id=${mine.id}`);
      const before = Date.now();
      await page.getByRole('group', { name: T('preset.label') }).getByRole('button', { name: T(key), exact: true }).click();
      await page.waitForURL(/[?&]until_ms=\d+/);
      const after = Date.now();
      const q = new URL(page.url()).searchParams;
      assert.equal(q.get('job_id'), String(mine.id), 'the other filters kept');
      const range = [Number(q.get('from_ms')), Number(q.get('until_ms'))];
      // The calendar's, as of the click (either side of a midnight).
      assert.ok([rangeAt(before), rangeAt(after)].some((r) => r[0] === range[0] && r[1] === range[1]),
        `${key}: ${range} is ${rangeAt(before)} or ${rangeAt(after)}`);
      const row = page.locator(`tr[data-trigger="${triggerId}"]`);
      if (firedAt >= range[0] && firedAt < range[1]) await row.waitFor();
      else {
        await page.getByText(T('logs.none'), { exact: true }).waitFor();
        assert.equal(await row.count(), 0);
      }
      if (key === 'preset.today') await shot(page, 'zh-CN-24-logs-today');
    }

    // Retention on its admin page: the configured days as the API reads
    // them, applied now after a confirmation, and what it dropped.
    const conf = await getJson(page, '/api/v1/maintenance/retention');
    await page.goto(`${BASE}/retention`);
    const on = conf.days >= conf.min_days;
    await page.getByText(on ? T('ops.retention.configured', { days: conf.days }) : T('ops.retention.configuredOff', { min: conf.min_days }), { exact: true }).waitFor();
    const keep = page.getByLabel(T('ops.retention.days'), { exact: true });
    assert.equal(await keep.inputValue(), on ? String(conf.days) : '');
    await keep.fill('3650');
    dialogs.length = 0;
    const appliedFrom = Date.now();
    await page.getByRole('button', { name: T('ops.retention.apply'), exact: true }).click();
    const doneText = fill(T('ops.retention.done', { days: 3650 }).split('{cutoff}')[0], {});
    const done = page.locator('p', { hasText: doneText });
    await done.waitFor();
    assert.deepEqual(dialogs, [T('ops.retention.confirm', { days: 3650 })], 'asked first');
    const cutoffAt = (now) => new Date((Math.floor(now / DAY) - 3650) * DAY).toISOString();
    assert.ok([cutoffAt(appliedFrom), cutoffAt(Date.now())].includes(await done.locator('time').getAttribute('datetime')), 'the cutoff: 3650 UTC days back');
    // Nothing in this database is ten years old.
    await page.getByText(T('ops.retention.none'), { exact: true }).waitFor();
    await until(page, 'the retention audited', async () =>
      (await getJson(page, '/api/v1/audit?action=retention.apply')).items.some((a) => a.detail === '3650 days'), { reload: false });
    await shot(page, 'zh-CN-25-retention-applied');

    // The script editor: the script highlighted by type, an old version
    // edited and saved as the newest, and each type's starter template.
    await until(page, 'both versions kept', async () =>
      (await getJson(page, `/api/v1/jobs/${scripted.id}/scripts`)).items.length === 2, { reload: false });
    await page.goto(`${BASE}/jobs/${scripted.id}`);
    const source = page.getByLabel(T('job.script'), { exact: true });
    await source.waitFor();
    const tokens = async (cls) => page.locator(`.editor code .tok-${cls}`).allTextContents();
    await until(page, 'the script highlighted', async () => (await tokens('comment')).includes('# second version'), { reload: false });
    assert.deepEqual(await tokens('keyword'), ['echo', 'exit']);
    assert.ok((await tokens('string')).some((s) => s.startsWith('"hello')), 'a string');
    assert.deepEqual(await tokens('var'), ['$HOME']);
    assert.deepEqual(await tokens('number'), ['3']);
    await shot(page, 'zh-CN-26-script-highlighted');
    await page.locator('tr[data-version="1"]').getByRole('button', { name: T('script.edit'), exact: true }).click();
    assert.equal(await source.inputValue(), firstScript);
    assert.equal(await page.getByLabel(T('job.remark'), { exact: true }).inputValue(), T('script.editedFrom', { version: 1 }));
    await until(page, 'the old version highlighted', async () => (await tokens('comment')).length === 0, { reload: false });
    const edited = `${firstScript}echo edited\n`;
    await source.fill(edited);
    await page.getByRole('button', { name: T('common.save') }).click();
    await until(page, 'the edit saved as the newest version', async () => {
      const versions = (await getJson(page, `/api/v1/jobs/${scripted.id}/scripts`)).items;
      const newest = versions.find((v) => v.version === 3);
      return newest && newest.glue_source === edited && newest.glue_remark === T('script.editedFrom', { version: 1 });
    }, { reload: false });
    assert.equal((await getJson(page, `/api/v1/jobs/${scripted.id}`)).glue_source, edited);
    // The starter templates, as the console serves them.
    const templates = await page.evaluate(async () => {
      const m = await import('/assets/editor.js');
      return { shell: m.templateFor('GLUE_SHELL'), python: m.templateFor('GLUE_PYTHON') };
    });
    await page.goto(`${BASE}/jobs/${scripted.id}`);
    await source.waitFor();
    dialogs.length = 0;
    await page.getByRole('button', { name: T('script.insertTemplate'), exact: true }).click();
    assert.deepEqual(dialogs, [T('script.replaceConfirm')], 'asked before replacing a script');
    assert.equal(await source.inputValue(), templates.shell);
    await page.getByLabel(T('job.scriptType'), { exact: true }).selectOption('GLUE_PYTHON');
    assert.equal(await source.inputValue(), templates.python, 'a new type starts from its template');
    await until(page, 'Python highlighted', async () => (await tokens('keyword')).includes('import'), { reload: false });

    // Every other screen, translated.
    for (const [path, name, ready] of [
      [`/jobs/new`, '13-job-new', '#preview li'],
      [`/groups`, '14-groups', 'tbody tr'],
      [`/groups/${APP}`, '15-group', '#ex'],
      ['/cluster', '16-cluster', 'dl.facts'],
      ['/account', '17-account', 'form'],
      ['/users', '18-users', 'tbody tr'],
      [`/users/${encodeURIComponent(me)}`, '19-user', 'form'],
      ['/audit', '20-audit', 'tbody tr'],
      ['/channels', '21-channels', 'tbody tr'],
      ['/retention', '22-retention', 'form'],
      [`/logs/${encodeURIComponent(triggerId)}`, '23-trigger-log', 'dl.facts dd'],
      ['/channels/ding-ops', '27-channel-edit', 'form'],
    ]) {
      await page.goto(`${BASE}${path}`);
      await page.locator(ready).first().waitFor();
      await screen(name);
    }

    // The language is the user's: switched here, it follows them to a
    // browser whose own language is English.
    await page.getByRole('combobox', { name: T('nav.language') }).selectOption('zh-TW');
    await page.locator('html[lang="zh-TW"]').waitFor();
    await until(page, 'the language kept', async () => (await getJson(page, '/api/v1/auth/me')).language === 'zh-TW', { reload: false });
    const elsewhere = await (await browser.newContext({ locale: 'en-US' })).newPage();
    await elsewhere.goto(`${BASE}/login`);
    await elsewhere.locator('html[lang="en"]').waitFor();
    await elsewhere.getByLabel(cats.en['login.username'], { exact: true }).fill(ADMIN[0]);
    await elsewhere.getByLabel(cats.en['login.password'], { exact: true }).fill(ADMIN[1]);
    await elsewhere.getByRole('button', { name: cats.en['login.submit'] }).click();
    await elsewhere.locator('html[lang="zh-TW"]').waitFor();
    await elsewhere.getByRole('link', { name: cats['zh-TW']['nav.jobs'], exact: true }).waitFor();
    await assertAllTranslated(elsewhere, cats['zh-TW'], 'zh-TW dashboard');
    await elsewhere.getByRole('combobox', { name: cats['zh-TW']['nav.language'] }).selectOption('zh-CN');
    await elsewhere.locator('html[lang="zh-CN"]').waitFor();
    await until(elsewhere, 'the language kept', async () => (await getJson(elsewhere, '/api/v1/auth/me')).language === 'zh-CN', { reload: false });

    assert.deepEqual(scriptErrors, [], 'no script error in the console');
  } finally {
    await browser.close();
  }
});
