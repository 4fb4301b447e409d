// The web dashboard in a real browser: Debian's chromium, driven by playwright-core, against
// the real crewd (fake runtime) behind `crewctl ui`. Screenshots of every page go to
// target/ui-screenshots/ (CI keeps them as artifacts).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { chromium } from 'playwright-core';

import { HERE, REPO, startDaemon } from '../node/daemon.mjs';
import { httpCall } from '../node/crew-client.mjs';

const SHOTS = path.join(REPO, 'target', 'ui-screenshots');
const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
const CREWCTL = process.env.CREWCTL_BIN
  ? path.resolve(process.env.CREWCTL_BIN)
  : path.join(REPO, 'target', 'debug', 'crewctl');

// The flags this machine needs: no sandbox as root, and no background traffic to Google.
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** `crewctl ui` for `socket`; resolves with its URL (first stdout line) and the process. */
function startUi(socket, env) {
  const child = spawn(CREWCTL, ['--socket', socket, 'ui', '--no-open'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (c) => { err += c; });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve({ url: line.trim(), child });
    });
    child.once('exit', (code) => reject(new Error(`crewctl ui exited ${code}: ${err}`)));
  });
}

/** A raw HTTP request, so Host and Origin can be anything. */
function raw(url, { method = 'GET', headers = {}, body } = {}) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers }, (res) => {
      let data = '';
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

describe('dashboard', { timeout: 240_000 }, () => {
  /** @type {Awaited<ReturnType<typeof startDaemon>>} */
  let d;
  let ui;
  /** The dashboard under its gateway's random path prefix (`http://127.0.0.1:PORT/c-…`). */
  let base;
  let browser;
  let page;
  let env;

  const call = (method, params) => httpCall(d.socket, method, params);
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  const nodes = (status) => page.locator(`#dag .node[data-status="${status}"]`);
  // A run's page, once it shows that run: until then the page (its DAG, its buttons) is still
  // the previous view's, and a test would act on the previous run.
  const openRun = async (runId) => {
    await page.goto(`${base}/#/run/${runId}`);
    await page.locator(`main[data-run-id="${runId}"]`).waitFor();
  };

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install chromium) or set CHROMIUM_BIN`);
    mkdirSync(SHOTS, { recursive: true });
    d = await startDaemon();
    env = { ...process.env, HOME: d.home, NO_COLOR: '1' };
    ui = await startUi(d.socket, env);
    { const u = new URL(ui.url); base = u.origin + u.pathname.replace(/\/$/, ''); }
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  });

  after(async () => {
    await browser?.close();
    ui?.child.kill('SIGINT');
    await d?.stop();
    d?.cleanup();
  });

  test('without the token, or from another origin, nothing is served', async () => {
    const host = new URL(base).host;
    const origin = new URL(base).origin;
    assert.equal((await raw(`${base}/`)).status, 401);
    assert.equal((await raw(`${origin}/`)).status, 401);
    assert.equal((await raw(`${base}/assets/app.js`)).status, 401);
    const rpcBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'daemon.ping' });
    assert.equal((await raw(`${base}/rpc`, { method: 'POST', body: rpcBody, headers: { 'content-type': 'application/json' } })).status, 401);
    assert.equal((await raw(`${base}/?token=${'0'.repeat(64)}`)).status, 401);
    // The right token: a cookie that scripts cannot read and other sites do not send.
    const token = new URL(ui.url).searchParams.get('token');
    const signIn = await raw(ui.url);
    assert.equal(signIn.status, 303);
    assert.equal(signIn.headers.location, `${new URL(base).pathname}/`);
    const cookie = String(signIn.headers['set-cookie']);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    // Its name and Path are the gateway's own: no other server on 127.0.0.1 receives it.
    assert.match(cookie, new RegExp(`Path=${new URL(base).pathname}/`));
    const name = cookie.split('=')[0];
    assert.match(name, /^crew_ui_[0-9a-f]{16}$/);
    const withCookie = { cookie: `${name}=${token}` };
    assert.equal((await raw(`${origin}/rpc`, { method: 'POST', body: rpcBody, headers: { ...withCookie, 'content-type': 'application/json' } })).status, 401);
    assert.equal((await raw(`${base}/rpc`, { method: 'POST', body: rpcBody, headers: { cookie: `${name}=0; ${name}=${token}`, 'content-type': 'application/json' } })).status, 401);
    assert.equal((await raw(`${base}/`, { headers: withCookie })).status, 200);
    // DNS rebinding: right cookie, foreign Host.
    assert.equal((await raw(`${base}/`, { headers: { ...withCookie, host: `evil.example:${new URL(base).port}` } })).status, 403);
    // Cross-site POST and WebSocket: right cookie, foreign Origin.
    const post = await raw(`${base}/rpc`, { method: 'POST', body: rpcBody, headers: { ...withCookie, 'content-type': 'application/json', origin: 'http://evil.example' } });
    assert.equal(post.status, 403);
    const ws = await raw(`${base}/rpc`, { headers: { ...withCookie, origin: 'http://evil.example', connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
    assert.equal(ws.status, 403);
    // Same origin: the API answers through the gateway.
    const ok = await raw(`${base}/rpc`, { method: 'POST', body: rpcBody, headers: { ...withCookie, 'content-type': 'application/json', origin, host } });
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.body).result.pid, d.pid);
  });

  test('opening the printed URL signs in and shows the runs', async () => {
    await page.goto(ui.url);
    assert.equal(new URL(page.url()).search, '', 'the token left the address bar');
    await page.locator('#conn[data-state="up"]').waitFor();
    assert.equal(await page.evaluate(() => document.cookie), '', 'the cookie is HttpOnly');
    await page.locator('h1', { hasText: 'Runs' }).waitFor();
    await shot('runs-empty');
  });

  test('start a run from the page: plan preview, then its DAG reaches completed', async () => {
    await page.goto(`${base}/#/new`);
    await page.locator('#run-goal').fill('Add a --verbose flag');
    await page.locator('#run-cwd').fill(d.work);
    await page.locator('#run-runtime').fill('fake');
    await page.locator('#preview-plan').click();
    await page.locator('#plan-preview li').first().waitFor();
    assert.match(await page.locator('#plan-preview li').first().innerText(), /^01_explore — explorer/);
    assert.match(await page.locator('#plan-preview').innerText(), /No diagnostics/);
    await shot('new-run-preview');
    await page.locator('#start-run').click();
    await page.waitForURL(/#\/run\//);
    await page.locator('#dag .node').first().waitFor();
    const total = await page.locator('#dag .node').count();
    assert.ok(total >= 4, `${total} nodes drawn`);
    await page.locator('main[data-run-status="completed"]').waitFor();
    await page.waitForFunction((n) => document.querySelectorAll('#dag .node[data-status="completed"]').length === n, total);
    // Edges for the dependencies, laid out by the library (not one box per row).
    assert.ok(await page.locator('#dag path.edge').count() >= total - 1);
    await page.locator('#dag .node').first().click();
    await page.locator('#task-panel h2', { hasText: '01_explore' }).waitFor();
    await page.locator('#task-panel details', { hasText: 'Transcript' }).first().waitFor();
    await shot('run-completed');
  });

  test('approve a plan from the page', async () => {
    const r = await call('team.run', { goal: 'Refactor the parser', cwd: d.work, runtime: 'fake', requirePlanApproval: true });
    await openRun(r.runId);
    await page.locator('main[data-run-status="blocked"]').waitFor();
    await page.locator('.blocked', { hasText: 'approve the plan' }).waitFor();
    await shot('run-awaiting-approval');
    await page.locator('button[data-action="team.approve"]').click();
    await page.locator('main[data-run-status="completed"]').waitFor();
  });

  test('a fan-out awaiting approval shows the added tasks, and approve runs them', async () => {
    // A user team (trusted: its step may name verification commands) whose planner fans out
    // into two tasks, the fake agent answering with the block below.
    const conf = path.join(d.home, '.config', 'crew');
    mkdirSync(path.join(conf, 'teams'), { recursive: true });
    mkdirSync(path.join(conf, 'workflows'), { recursive: true });
    const blockFile = path.join(path.dirname(d.work), 'fanout-block.json');
    writeFileSync(blockFile, JSON.stringify({ tasks: [
      { id: 'parser', role: 'executor', title: 'Parse the flag', task: 'Parse it. [fake:sleep=1ms]', dependsOn: [], scope: ['src/cli.rs'] },
      { id: 'tests', role: 'executor', title: 'Test the flag', task: 'Test it. [fake:sleep=1ms]', dependsOn: ['parser'], scope: ['tests/**'] },
    ] }));
    writeFileSync(path.join(conf, 'teams', 'fan-ui.team.md'),
      '---\nname: fan-ui\ndefaultWorkflow: fan-ui\nmaxConcurrency: 4\n---\n\n- planner: agent=planner\n- executor: agent=executor\n- verifier: agent=verifier\n');
    writeFileSync(path.join(conf, 'workflows', 'fan-ui.workflow.md'),
      `---\nname: fan-ui\n---\n\n## plan\nrole: planner\nexpands: tasks\n\nSplit the work. [fake:fanout=${blockFile}]\n\n` +
      '## check\nrole: verifier\ndependsOn: plan\nverifyCommands: echo checked\n\nCheck it. [fake:sleep=1ms]\n');
    const r = await call('team.run', { goal: 'Add a --dry-run flag', cwd: d.work, runtime: 'fake', team: 'fan-ui', requirePlanApproval: true });
    await openRun(r.runId);
    await page.locator('main[data-run-status="blocked"]').waitFor();
    const added = page.locator('#added-tasks[data-pending="true"]');
    await added.waitFor();
    assert.match(await added.locator('h2').innerText(), /added by 01_plan, awaiting your approval/);
    const row = async (id) => (await added.locator(`tr[data-added="${id}"] td`).allInnerTexts()).map((x) => x.trim());
    assert.deepEqual(await row('parser'), ['parser', 'executor', 'Parse the flag', '-', 'src/cli.rs', 'none']);
    assert.deepEqual(await row('tests'), ['tests', 'executor', 'Test the flag', 'parser', 'tests/**', 'none']);
    // The commands that will check the added work: the step that waits for it.
    assert.equal((await added.locator('.later-checks li[data-task="02_check"]').innerText()).trim(), '02_check then runs echo checked');
    // The DAG holds the added tasks, drawn from the status the page read.
    for (const id of ['01_plan', '02_check', 'parser', 'tests']) await page.locator(`#dag .node[data-task="${id}"]`).waitFor();
    assert.equal(await page.locator('#dag .node').count(), 4);
    assert.ok(await page.locator('button[data-action="team.approve"]').isVisible());
    await shot('fan-out-awaiting-approval');
    await page.locator('button[data-action="team.approve"]').click();
    await page.locator('main[data-run-status="completed"]').waitFor();
    for (const id of ['parser', 'tests', '02_check']) await page.locator(`#dag .node[data-task="${id}"][data-status="completed"]`).waitFor();
    await page.locator('#added-tasks[data-pending="false"]').waitFor();
    const st = await call('team.status', { runId: r.runId });
    assert.deepEqual(st.addedTasks.map((t) => [t.id, t.awaitingApproval]), [['parser', false], ['tests', false]]);
    await shot('fan-out-approved');
  });

  test('answer a waiting task from the page', async () => {
    const r = await call('team.run', { goal: 'Add a cache [fake:ask=Which backend: redis or memory?]', cwd: d.work, runtime: 'fake', team: 'fast-fix' });
    await openRun(r.runId);
    await nodes('waiting').first().waitFor();
    const asked = await nodes('waiting').first().getAttribute('data-task');
    await nodes('waiting').first().click();
    await page.locator('#task-panel .question', { hasText: 'Which backend' }).waitFor();
    await page.locator('#answer').fill('memory');
    await shot('task-waiting');
    await page.locator('#task-panel button[type="submit"]').click();
    await page.waitForFunction((id) => document.querySelector(`#dag .node[data-task="${id}"]`)?.getAttribute('data-status') !== 'waiting', asked);
    const st = await call('team.status', { runId: r.runId });
    const t = st.tasks.find((x) => x.id === asked);
    assert.notEqual(t.status, 'waiting');
    assert.equal(t.question ?? null, null);
  });

  test('cancel a running run from the page', async () => {
    const r = await call('team.run', { goal: 'Slow work [fake:sleep=60s]', cwd: d.work, runtime: 'fake' });
    await openRun(r.runId);
    await nodes('running').first().waitFor();
    await page.locator('button[data-action="team.cancel"]').click();
    await page.locator('main[data-run-status="cancelled"]').waitFor();
    await nodes('cancelled').first().waitFor();
    await shot('run-cancelled');
  });

  test('a refusal shows the API message', async () => {
    await page.goto(`${base}/#/new`);
    await page.locator('#run-goal').fill('Anything');
    await page.locator('#run-cwd').fill(d.work);
    await page.locator('#run-runtime').fill('no-such-runtime');
    await page.locator('#preview-plan').click();
    const alert = page.locator('#msg [role="alert"]');
    await alert.waitFor();
    let apiMessage;
    try {
      await call('team.plan', { goal: 'Anything', cwd: d.work, runtime: 'no-such-runtime' });
    } catch (e) {
      apiMessage = e.message;
    }
    assert.ok(apiMessage, 'the API refuses too');
    assert.ok((await alert.innerText()).includes(apiMessage), `${await alert.innerText()} vs ${apiMessage}`);
    await shot('refusal');
  });

  test('schedules show their next fires', async () => {
    await call('schedule.add', { name: 'nightly-review', cron: '0 3 * * 1-5', timezone: 'UTC', run: { goal: 'Review the day', cwd: d.work, runtime: 'fake', team: 'review' } });
    await page.goto(`${base}/#/schedules`);
    const fires = page.locator('article.job .next-fires');
    await fires.waitFor();
    const text = await fires.innerText();
    assert.equal(text.split(',').length, 5, text);
    assert.match(text, /T03:00:00/);
    await shot('schedules');
    await page.goto(`${base}/#/daemon`);
    await page.locator('h2', { hasText: 'Result reuse' }).waitFor();
    await shot('daemon');
  });

  test('a worktree task shows its branch and diff (as text), and the runs list filters by team in the API', async () => {
    // A repository of its own: the other tests' runs work in d.work in shared mode.
    const repo = path.join(path.dirname(d.work), 'repo');
    mkdirSync(repo, { recursive: true });
    const git = (...args) => execFileSync('git', args, { cwd: repo, env: { ...process.env, GIT_AUTHOR_NAME: 'u', GIT_AUTHOR_EMAIL: 'u@u', GIT_COMMITTER_NAME: 'u', GIT_COMMITTER_EMAIL: 'u@u' } });
    git('init', '-q', '-b', 'main');
    writeFileSync(path.join(repo, 'README'), 'hello\n');
    git('add', '-A');
    git('commit', '-qm', 'init');
    // The change holds markup: it must show as text, never become elements or run.
    const markup = '<b id="injected">bold</b><img src=x onerror="window.pwned=1">';
    const r = await call('team.run', { goal: `Fix it [fake:write=page.html:${markup}]`, cwd: repo, runtime: 'fake', team: 'fast-fix', workspace: 'worktree' });
    await openRun(r.runId);
    await page.locator('main[data-run-status="completed"]').waitFor();
    await page.locator('.run-head .workspace', { hasText: `crew/${r.runId}` }).waitFor();
    const st = await call('team.status', { runId: r.runId });
    const [taskId, commit] = Object.entries(st.workspace.tasks).find(([, c]) => c.commit !== c.start);
    const diff = await call('team.diff', { runId: r.runId, taskId });
    await page.locator(`#dag .node[data-task="${taskId}"]`).click();
    const change = page.locator('#task-change');
    await change.waitFor();
    const text = await change.innerText();
    assert.ok(text.includes(commit.branch), text);
    assert.ok(text.includes('1 file changed, +1 -0'), text);
    assert.equal((await change.locator('pre.patch').innerText()).trimEnd(), diff.patch.trimEnd());
    assert.ok(diff.patch.includes(`+${markup}`), diff.patch);
    assert.equal(await page.locator('#injected').count(), 0, 'the patch is not parsed as HTML');
    assert.equal(await page.evaluate(() => /** @type {any} */ (window).pwned), undefined);
    await shot('task-change');

    // The team filter is the API's: every row the page shows is the team's, and all of them.
    const listed = await call('team.list', { team: 'fast-fix', limit: 1000 });
    assert.ok(listed.runs.length >= 2 && listed.runs.every((x) => x.team === 'fast-fix'));
    await page.goto(`${base}/#/?team=fast-fix`);
    await page.locator(`tr[data-run="${r.runId}"]`).waitFor();
    const rows = await page.locator('table.runs tbody tr[data-run]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run')));
    assert.deepEqual(rows, listed.runs.map((x) => x.id));
    await shot('runs-by-team');
  });

  test('a daemon restart under the open page: it reconnects and resumes with no gap or duplicate', async () => {
    const r = await call('team.run', { goal: 'Survive a restart [fake:sleep=1500ms]', cwd: d.work, runtime: 'fake' });
    await openRun(r.runId);
    await nodes('running').first().waitFor();
    const root = d.root;
    await d.stop();
    await page.locator('#conn[data-state="down"]').waitFor();
    d = await startDaemon({ root });
    await page.locator('#conn[data-state="up"]').waitFor();
    await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 120_000 });
    await shot('run-after-restart');
    // What the page's subscription delivered is exactly the journal's events of the run from
    // where it started.
    const seqs = await page.evaluate((runId) => [...window.crewRpc.subs].find((s) => s.runId === runId).seqs, r.runId);
    assert.ok(seqs.length > 0);
    const events = [];
    let afterSeq = seqs[0] - 1;
    for (;;) {
      const res = await call('team.events', { runId: r.runId, afterSeq, limit: 1000 });
      events.push(...res.events.map((e) => e.seq));
      if (res.events.length === 0 || res.nextSeq === afterSeq) break;
      afterSeq = res.nextSeq;
    }
    assert.deepEqual(seqs, events);
  });
});
