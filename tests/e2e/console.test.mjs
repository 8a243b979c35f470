// The rondo console as a person uses it, in Debian's chromium (headless),
// against a real cluster that tests/tests/console.rs starts: sign-in, a
// group and a cron job created with the preview shown, the job firing in
// the logs, a running script trigger followed live and killed, the job
// edited (a routing choice, a refused field that saves nothing), copied and
// given a child from the picker, script versions diffed and restored, the
// group's executors, an API token made and revoked, a user created and
// disabled, a user moved from XXL-JOB made to set a new password first,
// data that looks like HTML shown as text, the job stopped, a viewer
// without write controls whom the API refuses, and an ended session that
// returns to sign-in and back. Screenshots of each screen go to
// $RONDO_SCREENSHOTS. In English (the browser's language is en-GB);
// console-zh.test.mjs goes through the console in Chinese.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { BASE, ADMIN, VIEWER, APP, launch, getJson, write, shot, until, served } from './helpers.mjs';

const nav = (page, name) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true });

async function signIn(page, [user, password]) {
  await page.getByLabel('Username', { exact: true }).fill(user);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

test('the console, from sign-in to a killed trigger, for an admin and a viewer', { timeout: 300_000 }, async () => {
  const browser = await launch();
  try {
    const admin = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Asia/Shanghai', locale: 'en-GB' });
    const page = await admin.newPage();
    const scriptErrors = [];
    page.on('pageerror', (e) => scriptErrors.push(e));

    // A deep link without a session goes to sign-in and comes back.
    await page.goto(`${BASE}/groups`);
    await page.waitForURL(/\/login\?next=%2Fgroups$/);
    await shot(page, '01-sign-in');
    await page.getByLabel('Username', { exact: true }).fill(ADMIN[0]);
    await page.getByLabel('Password', { exact: true }).fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: /password|credentials|sign/i }).first().waitFor();
    await signIn(page, ADMIN);
    await page.waitForURL(`${BASE}/groups`);

    // The form's choices are the API's values, as served: a routing,
    // block, misfire, schedule or script type the spec does not know could
    // never be sent.
    const spec = await getJson(page, '/api/v1/openapi.json');
    const choices = await served(page, 'choices.js');
    const enumOf = (name) => spec.components.schemas[name].enum;
    for (const [list, schema] of [[choices.ROUTING, 'Routing'], [choices.BLOCK, 'BlockStrategy'], [choices.MISFIRE, 'Misfire'],
      [choices.SCHEDULE_TYPES, 'ScheduleType'], [choices.GLUE, 'GlueType'], [choices.ROLES, 'Role']]) {
      assert.deepEqual([...list].sort(), [...enumOf(schema)].sort(), `the console's ${schema} choices`);
    }

    // A group.
    await page.getByLabel('App name').fill(APP);
    await page.getByLabel('Title').fill('Web shop');
    await page.getByRole('button', { name: 'Create group' }).click();
    await page.getByRole('link', { name: APP, exact: true }).first().waitFor();
    await shot(page, '02-groups');

    // A screen's polling says it is one (X-Rondo-Background), so it does
    // not keep an idle session alive; the screen's first read, the user's
    // own, does not say so.
    const executorReads = [];
    const noteRead = (req) => {
      if (req.url().includes('/api/v1/executors')) executorReads.push(req.headers()['x-rondo-background'] || '');
    };
    page.on('request', noteRead);
    await page.getByRole('link', { name: APP, exact: true }).first().click();
    await page.waitForRequest((req) => req.url().includes('/api/v1/executors')
      && req.headers()['x-rondo-background'] === '1', { timeout: 15000 });
    page.off('request', noteRead);
    assert.equal(executorReads[0], '', "the group screen's first read is not a background one");

    // A cron job: a bad expression is refused next to its field, the
    // preview shows the next five fires as the expression is typed.
    await nav(page, 'Jobs').click();
    await page.getByRole('link', { name: 'New job' }).click();
    await page.waitForURL(`${BASE}/jobs/new`);
    await page.getByLabel('Group').selectOption(APP);
    await page.getByLabel('Description').fill('Every two seconds');
    const schedule = page.getByLabel('Schedule', { exact: true });
    await schedule.fill('0 0 25 * * ?');
    await page.locator('#err-schedule_conf').filter({ hasText: /hour/i }).waitFor();
    await schedule.fill('*/2 * * * * ?');
    await page.locator('#preview li').nth(4).waitFor();
    assert.equal(await page.locator('#preview li').count(), 5);
    await page.getByLabel('Handler', { exact: true }).fill('demo');
    await shot(page, '03-job-form-with-preview');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/\/jobs\/\d+$/);
    const cronJob = page.url().split('/').pop();

    // It fires: its triggers show in the logs, succeeded.
    await page.goto(`${BASE}/logs?job_id=${cronJob}`);
    await until(page, 'a successful trigger of the cron job', async () =>
      (await page.locator('tbody .status.ok').count()) > 0);
    await shot(page, '04-logs');

    // A script job, triggered once: its log follows live, and it is killed.
    await page.goto(`${BASE}/jobs/new`);
    await page.getByLabel('Group').selectOption(APP);
    await page.getByLabel('Description').fill('Counting script');
    await page.getByLabel('Schedule type').selectOption('NONE');
    await page.getByLabel('Script type').selectOption('GLUE_SHELL');
    await page.getByLabel('Script', { exact: true }).fill('i=0\nwhile [ $i -lt 600 ]; do i=$((i+1)); echo "line $i"; sleep 0.2; done\n');
    await page.getByLabel('Version remark').fill('first version');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/\/jobs\/\d+$/);
    const scriptJob = page.url().split('/').pop();
    await page.getByRole('button', { name: 'Trigger once' }).click();
    await page.waitForURL(/\/logs\/[^/?]+$/);
    const log = page.getByLabel('Log lines');
    await log.filter({ hasText: 'line 3' }).waitFor({ timeout: 30_000 });
    const before = (await log.textContent()).split('\n').length;
    await until(page, 'more lines while it runs, without reloading', async () =>
      (await log.textContent()).split('\n').length > before + 2, { reload: false });
    await shot(page, '05-trigger-running');
    await page.getByRole('button', { name: 'Kill' }).click();
    await page.locator('#follow-state').filter({ hasText: 'Ended.' }).waitFor({ timeout: 30_000 });
    assert.equal(await page.locator('dl.facts .status').textContent(), 'failure');
    await shot(page, '06-trigger-killed');

    // Edit the cron job: a routing choice is saved as the API names it; a
    // refused zone is shown next to its field and nothing of that submit
    // is saved.
    await page.goto(`${BASE}/jobs/${cronJob}`);
    await page.getByLabel('Routing').selectOption('LEAST_FREQUENTLY_USED');
    await page.getByRole('button', { name: 'Save' }).click();
    await until(page, 'the routing saved', async () =>
      (await getJson(page, `/api/v1/jobs/${cronJob}`)).routing === 'LEAST_FREQUENTLY_USED', { reload: false });
    const saved = await getJson(page, `/api/v1/jobs/${cronJob}`);
    assert.equal(saved.description, 'Every two seconds');
    assert.equal(saved.schedule_conf, '*/2 * * * * ?');
    await page.getByLabel('Description').fill('changed with a bad zone');
    await page.getByLabel('Time zone').fill('Mars/Olympus_Mons');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#err-zone').filter({ hasText: /zone|Mars/i }).waitFor();
    assert.equal((await getJson(page, `/api/v1/jobs/${cronJob}`)).description, 'Every two seconds', 'nothing half-saved');
    await shot(page, '15-job-field-error');

    // Copy it, with the script job picked as its child.
    await page.goto(`${BASE}/jobs/${cronJob}`);
    await page.getByRole('link', { name: 'Copy' }).click();
    await page.waitForURL(/\/jobs\/new\?copy=/);
    assert.equal(await page.getByLabel('Description').inputValue(), 'Every two seconds');
    await page.getByLabel('Description').fill('Copied job');
    await page.getByLabel('Find a child job').fill('Counting');
    await page.getByRole('button', { name: `Add job ${scriptJob} as a child` }).click();
    assert.equal(await page.getByLabel('Child jobs').inputValue(), scriptJob);
    await page.getByLabel('Running', { exact: true }).uncheck();
    await shot(page, '16-job-copy-with-child');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/\/jobs\/\d+$/);
    const copy = await getJson(page, `/api/v1/jobs/${page.url().split('/').pop()}`);
    assert.notEqual(String(copy.id), cronJob);
    assert.deepEqual([copy.description, copy.routing, copy.schedule_conf, copy.child_jobs, copy.enabled],
      ['Copied job', 'LEAST_FREQUENTLY_USED', '*/2 * * * * ?', [Number(scriptJob)], false]);

    // Script versions: a second version, its diff, and the first restored.
    await page.goto(`${BASE}/jobs/${scriptJob}`);
    await page.getByLabel('Script', { exact: true }).fill('echo "second version"\n');
    await page.getByLabel('Version remark').fill('second version');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('cell', { name: 'second version', exact: true }).waitFor();
    await page.getByRole('row', { name: /first version/ }).getByRole('button', { name: 'Diff with current' }).click();
    const shownDiff = await page.locator('pre.log').last().textContent();
    assert.match(shownDiff, /^- i=0$/m);
    assert.match(shownDiff, /^\+ echo "second version"$/m);
    await shot(page, '17-script-versions-diff');
    await page.getByRole('row', { name: /first version/ }).getByRole('button', { name: 'Restore' }).click();
    await until(page, 'the first version restored', async () =>
      (await getJson(page, `/api/v1/jobs/${scriptJob}`)).glue_source.startsWith('i=0'), { reload: false });

    // The group: its executor, with heartbeat, handlers and what it runs.
    await page.goto(`${BASE}/groups/${APP}`);
    const exRow = page.getByRole('row', { name: /web-1/ });
    await exRow.getByText('live').waitFor();
    assert.match(await exRow.textContent(), /script:sh/);
    assert.match(await exRow.textContent(), /ago/);
    await shot(page, '18-group-executors');

    // A group of XXL-JOB executors: an admin marks it as the gateway's,
    // and its access token is shown once, never again.
    await page.goto(`${BASE}/groups`);
    await page.getByLabel('App name').fill('xxl-billing');
    await page.getByRole('button', { name: 'Create group' }).click();
    await page.goto(`${BASE}/groups/xxl-billing`);
    await page.locator('#xxl-gateway').filter({ hasText: /^not served/ }).waitFor();
    await page.getByLabel('Served by the XXL-JOB gateway').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#xxl-token').filter({ hasText: /^none/ }).waitFor();
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Generate a new token' }).click();
    const xxlToken = await page.locator('#new-xxl-token').textContent();
    assert.match(xxlToken, /^[0-9a-f]{64}$/);
    await shot(page, '18b-group-xxl-token');
    await page.reload();
    await page.locator('#xxl-token').filter({ hasText: /^set/ }).waitFor();
    assert.ok(!(await page.content()).includes(xxlToken), 'the token is never shown again');
    assert.equal((await getJson(page, '/api/v1/groups/xxl-billing')).xxl_access.token, '***');

    // An API token: shown once, works as a bearer token, then revoked.
    await page.goto(`${BASE}/account`);
    await page.getByLabel('Token name').fill('ci');
    await page.getByRole('button', { name: 'Create token' }).click();
    const token = await page.locator('#new-token').textContent();
    const bearer = { Authorization: `Bearer ${token}` };
    const withToken = await fetch(`${BASE}/api/v1/jobs?limit=1`, { headers: bearer });
    assert.equal(withToken.status, 200);
    await shot(page, '19-account-token');
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Revoke token ci' }).click();
    await page.getByRole('button', { name: 'Revoke token ci' }).waitFor({ state: 'detached' });
    assert.equal((await fetch(`${BASE}/api/v1/jobs?limit=1`, { headers: bearer })).status, 401);

    // A user: created as an operator of the group, then disabled.
    await nav(page, 'Users').click();
    await page.getByLabel('Username', { exact: true }).fill('olga');
    await page.getByLabel('Password', { exact: true }).fill('short');
    await page.getByLabel('Role').selectOption('operator');
    await page.getByLabel(APP, { exact: true }).check();
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.locator('#err-password').filter({ hasText: /12/ }).waitFor();
    assert.equal((await page.request.get(`${BASE}/api/v1/users/olga`)).status(), 404, 'a refused user is not created');
    await page.getByLabel('Password', { exact: true }).fill('a long enough password');
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.waitForURL(`${BASE}/users/olga`);
    let olga = await getJson(page, '/api/v1/users/olga');
    assert.deepEqual([olga.role, olga.groups, olga.enabled], ['operator', [APP], true]);
    await page.getByLabel('Enabled').uncheck();
    await page.getByRole('button', { name: 'Save' }).click();
    await until(page, 'olga disabled', async () => !(await getJson(page, '/api/v1/users/olga')).enabled, { reload: false });
    await shot(page, '20-user-edit');
    await page.goto(`${BASE}/users`);
    await page.getByRole('link', { name: 'olga' }).waitFor();
    await shot(page, '21-users');

    // A user moved from XXL-JOB signs in once with the old password and
    // is taken to set a new one; nothing else opens until it is set.
    const xxlHash = createHash('md5').update('short1').digest('hex');
    const movedUser = await write(page, 'POST', '/api/v1/users', { username: 'moved', role: 'viewer', xxl_password_hash: xxlHash });
    assert.equal(movedUser.status(), 201);
    const movedContext = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-GB' });
    const mpage = await movedContext.newPage();
    mpage.on('pageerror', (e) => scriptErrors.push(e));
    await mpage.goto(`${BASE}/jobs`);
    await mpage.waitForURL(/\/login/);
    await signIn(mpage, ['moved', 'short1']);
    await mpage.waitForURL(`${BASE}/account`);
    await mpage.getByRole('alert').filter({ hasText: /moved from XXL-JOB/ }).waitFor();
    await shot(mpage, '21b-must-change-password');
    await mpage.goto(`${BASE}/logs`);
    await mpage.waitForURL(`${BASE}/account`);
    await mpage.getByLabel('Current password').fill('short1');
    await mpage.getByLabel('New password').fill('my own long password');
    await mpage.getByRole('button', { name: 'Change password' }).click();
    await mpage.waitForURL(`${BASE}/`);
    await nav(mpage, 'Jobs').waitFor();
    assert.equal((await getJson(mpage, '/api/v1/auth/me')).must_change_password, false);
    await movedContext.close();

    // Data that looks like HTML is shown as text, never run.
    const html = '<img src=x onerror="window.__xss=1"><b>bold</b>';
    const made = await write(page, 'POST', '/api/v1/jobs', { group: APP, handler: 'demo', description: html, schedule_type: 'NONE' });
    assert.equal(made.status(), 201);
    await page.goto(`${BASE}/jobs?q=${encodeURIComponent('bold')}`);
    await page.getByRole('link', { name: html }).waitFor();
    assert.equal(await page.locator('main img').count(), 0);
    assert.equal(await page.evaluate(() => globalThis.__xss), undefined);

    // Stop the cron job.
    await page.goto(`${BASE}/jobs/${cronJob}`);
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.getByRole('button', { name: 'Start' }).waitFor();
    const stopped = await page.request.get(`${BASE}/api/v1/jobs/${cronJob}`);
    assert.equal((await stopped.json()).enabled, false);
    await shot(page, '07-job-stopped');

    await page.goto(`${BASE}/jobs`);
    await page.getByRole('link', { name: 'Every two seconds' }).waitFor();
    await shot(page, '08-jobs');
    await page.goto(`${BASE}/`);
    await page.locator('svg.chart').waitFor();
    await shot(page, '09-dashboard');
    await page.goto(`${BASE}/cluster`);
    await page.getByText('Leader').first().waitFor();
    await shot(page, '10-cluster');
    await page.goto(`${BASE}/account`);
    await shot(page, '11-account');
    await page.goto(`${BASE}/audit`);
    await page.getByRole('cell', { name: 'job.create' }).first().waitFor();
    await shot(page, '12-audit');

    // At phone width the jobs page still works.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${BASE}/jobs`);
    await page.getByRole('link', { name: 'Every two seconds' }).waitFor();
    await shot(page, '13-jobs-phone');
    await page.setViewportSize({ width: 1280, height: 900 });

    // Paging: twenty jobs with 60 KiB scripts pass a page's byte bound, so
    // the first page ends early and the next starts where it ended
    // (`next_offset`), skipping none.
    const big = `# ${'x'.repeat(60 * 1024)}\necho done\n`;
    for (let i = 0; i < 20; i += 1) {
      const filler = await write(page, 'POST', '/api/v1/jobs',
        { group: APP, description: `filler ${i}`, schedule_type: 'NONE', glue_type: 'GLUE_SHELL', glue_source: big });
      assert.equal(filler.status(), 201);
    }
    const first = await getJson(page, '/api/v1/jobs?limit=20&sort=-id');
    const cut = first.next_offset;
    assert.ok(cut > 0 && cut < 20 && first.items.length === cut, `the first page ends at ${cut}`);
    await page.goto(`${BASE}/jobs`);
    await page.getByText(`1–${cut}`, { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.waitForURL(new RegExp(`[?&]offset=${cut}(&|$)`));
    await page.getByText(`${cut + 1}–${first.total}`, { exact: true }).waitFor();
    assert.ok(await page.getByRole('button', { name: 'Next' }).isDisabled(), 'the last page has no next');
    await page.getByRole('button', { name: 'Previous' }).click();
    await page.waitForURL(`${BASE}/jobs`);
    await page.getByText(`1–${cut}`, { exact: true }).waitFor();

    // The session ends (signed out elsewhere): the next screen asks to sign
    // in again, and then shows the screen asked for.
    const me = await (await page.request.get(`${BASE}/api/v1/auth/me`)).json();
    const out = await page.request.post(`${BASE}/api/v1/auth/logout`, { headers: { 'X-CSRF-Token': me.csrf_token } });
    assert.ok(out.ok(), `logout: ${out.status()}`);
    await nav(page, 'Logs').click();
    await page.waitForURL(/\/login\?next=%2Flogs$/);
    await signIn(page, ADMIN);
    await page.waitForURL(`${BASE}/logs`);

    // A viewer: no write control, and the API refuses the write anyway.
    const viewer = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const vpage = await viewer.newPage();
    await vpage.goto(`${BASE}/jobs/${cronJob}`);
    await vpage.waitForURL(/\/login/);
    await signIn(vpage, VIEWER);
    await vpage.waitForURL(`${BASE}/jobs/${cronJob}`);
    await vpage.getByText('Read only').waitFor();
    assert.equal(await vpage.getByRole('button', { name: 'Save' }).count(), 0);
    for (const name of ['Start', 'Trigger once', 'Kill all runs', 'Delete']) {
      assert.equal(await vpage.getByRole('button', { name }).count(), 0, `no ${name} for a viewer`);
    }
    assert.ok(await vpage.getByLabel('Description').isDisabled());
    // Oldest first: the fillers above put it on the newest-first list's
    // second page.
    await vpage.goto(`${BASE}/jobs?sort=id`);
    await vpage.getByRole('link', { name: 'Every two seconds' }).waitFor();
    assert.equal(await vpage.getByRole('link', { name: 'New job' }).count(), 0);
    await shot(vpage, '14-viewer-job-list');
    const vme = await (await vpage.request.get(`${BASE}/api/v1/auth/me`)).json();
    const refused = await vpage.request.post(`${BASE}/api/v1/jobs/${cronJob}/start`, { headers: { 'X-CSRF-Token': vme.csrf_token } });
    assert.equal(refused.status(), 403);
    assert.deepEqual(scriptErrors, [], 'no script error in the console');
  } finally {
    await browser.close();
  }
});
