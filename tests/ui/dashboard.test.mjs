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
import { shortIds } from '../../crates/crew-ui/web/ids.js';
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

// The page's short run ids are crewctl's (crates/crewctl/src/render/ids.rs, test `short_forms`):
// runs created in the same second differ only near the end, and each shows as much as it must.
test('short run ids are unique among the listed runs, as crewctl shows them', () => {
  const ids = [
    'team_20260310115500_3f9a1c2e00001111',
    'team_20260310115500_3f9a1c2e00002222',
    'team_20260309080000_a0b1c2d3e4f50617',
    'r-imported-1',
  ];
  assert.deepEqual([...shortIds(ids).values()], ['3f9a1c2e00001', '3f9a1c2e00002', 'a0b1c2d3', 'r-imported-1']);
  // Issue 32's pair: both showed `6a8f69d4`.
  const pair = ['team_20261203101500_6a8f69d48b9974dc', 'team_20261203101500_6a8f69d48b99be83'];
  assert.deepEqual([...shortIds(pair).values()], ['6a8f69d48b997', '6a8f69d48b99b']);
  assert.deepEqual([...shortIds([pair[0]]).values()], ['6a8f69d4']);
});

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
    // Each task's tokens and cost at a glance, on its node, as the API counts them.
    const runId = new URL(page.url()).hash.split('/')[2];
    const done = await call('team.status', { runId });
    // The timeline: a bar per attempt the journal holds, coloured by how it ended.
    const starts = (await call('team.events', { runId, afterSeq: 0, limit: 1000 })).events.filter((e) => e.type === 'task.started');
    await page.waitForFunction((n) => document.querySelectorAll('#timeline rect.bar').length === n, starts.length);
    const bars = await page.locator('#timeline rect.bar').evaluateAll((rs) => rs.map((r) => [r.getAttribute('data-task'), r.getAttribute('data-status')]));
    assert.deepEqual(bars.map(([t]) => t).sort(), starts.map((e) => e.taskId).sort());
    assert.ok(bars.every(([, s]) => s === 'completed'), JSON.stringify(bars));
    await shot('run-timeline');
    for (const t of done.tasks) {
      const label = await page.locator(`#dag .node[data-task="${t.id}"] .node-usage`).textContent();
      const n = await page.evaluate((x) => x.toLocaleString(), t.usage.input + t.usage.output);
      assert.equal(label, `${n} tok · $${t.usage.cost.toFixed(t.usage.cost < 1 ? 4 : 2)}`);
    }
    await page.locator('#dag .node').first().click();
    await page.locator('#task-panel h2', { hasText: '01_explore' }).waitFor();
    await page.locator('#task-panel details', { hasText: 'Transcript' }).first().waitFor();
    await shot('run-completed');
  });

  // Issue 32 item 9: every task's first attempt crashes and is retried, and the verifier's
  // failing verdict starts a fix round; each attempt is a bar of its own, on its task's lane,
  // in the order it ran, and the fix task's lane sits between the judge's two verdicts.
  test('the timeline shows retries and fix rounds as bars of their own', async () => {
    const goal = 'make it work [fake:crash-attempts=1][fake:append=work.txt:x\\n][fake:verdict-needs=fixed.txt][fake:fix-write=fixed.txt:ok]';
    const r = await call('team.run', { goal, cwd: d.work, runtime: 'fake' });
    await openRun(r.runId);
    await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 120_000 });
    const events = (await call('team.events', { runId: r.runId, afterSeq: 0, limit: 1000 })).events;
    const starts = events.filter((e) => e.type === 'task.started');
    assert.ok(events.some((e) => e.type === 'task.retrying'), 'a retry happened');
    assert.ok(events.some((e) => e.type === 'task.fix_added'), 'a fix round happened');
    await page.waitForFunction((n) => document.querySelectorAll('#timeline rect.bar').length === n, starts.length);
    const bars = await page.locator('#timeline rect.bar').evaluateAll((rs) => rs.map((r) => ({
      task: r.getAttribute('data-task'), attempt: Number(r.getAttribute('data-attempt')),
      status: r.getAttribute('data-status'), x: Number(r.getAttribute('x')), end: Number(r.getAttribute('x')) + Number(r.getAttribute('width')),
    })));
    const lane = (id) => bars.filter((b) => b.task === id);
    // A retried task: its crashed attempt, then the one after it, on one lane.
    for (const id of new Set(starts.map((e) => e.taskId))) {
      const own = lane(id);
      assert.equal(own.length, starts.filter((e) => e.taskId === id).length, `${id}: ${JSON.stringify(own)}`);
      assert.equal(own[0].status, 'failed', `${id}'s first attempt crashed: ${JSON.stringify(own)}`);
      assert.equal(own[own.length - 1].status, 'completed', `${id}: ${JSON.stringify(own)}`);
      for (let i = 1; i < own.length; i++) assert.ok(own[i].x >= own[i - 1].end - 1, `${id}: bars in order ${JSON.stringify(own)}`);
    }
    // The fix round: the judge's failing verdict, the fix task's bars, then its passing verdict.
    const judge = lane('04_verify');
    const fail = judge.find((b) => b.status === 'verdict_fail');
    assert.ok(fail, `a failing verdict bar: ${JSON.stringify(judge)}`);
    const fix = lane('_fix-04_verify-1');
    assert.ok(fix.length >= 1, JSON.stringify(bars));
    const pass = judge[judge.length - 1];
    assert.ok(fail.end <= fix[0].x + 1 && fix[fix.length - 1].end <= pass.x + 1, JSON.stringify({ judge, fix }));
    assert.match(await page.locator('#timeline rect.bar[data-status="verdict_fail"] title').first().textContent(), /04_verify, attempt \d+: verdict fail/);
    await shot('run-timeline-retries-fix-round');
  });

  // Issue 30: a judge's verdict and findings are on the page — the run's verdict in its head,
  // the judge's node marked with it, its panel listing the findings (a model's text, as text).
  test('a review run shows its verdict, the judge\'s node and its findings', async () => {
    const goal = 'review it [fake:verdict=request-changes][fake:finding=<b>the test</b> is wrong]';
    const r = await call('team.run', { goal, cwd: d.work, runtime: 'fake', team: 'review' });
    await openRun(r.runId);
    await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 120_000 });
    const st = await call('team.status', { runId: r.runId });
    const judge = st.tasks.find((t) => t.verdict);
    assert.ok(judge, JSON.stringify(st.tasks));
    assert.equal(judge.verdict.verdict, 'changes_requested');
    assert.match(await page.locator('#run-verdict').innerText(), /Verdict: changes requested/);
    const node = page.locator(`#dag .node[data-task="${judge.id}"]`);
    await page.waitForFunction((id) => document.querySelector(`#dag .node[data-task="${id}"]`)?.getAttribute('data-verdict') === 'changes_requested', judge.id);
    assert.match(await node.locator('.node-sub').textContent(), /· ✗ changes$/);
    // Its bar on the timeline is a failing verdict's.
    assert.equal(await page.locator(`#timeline rect.bar[data-task="${judge.id}"]`).last().getAttribute('data-status'), 'verdict_fail');
    await node.click();
    const v = page.locator('#task-panel #task-verdict');
    await v.waitFor();
    const text = await v.innerText();
    assert.match(text, /Verdict: changes requested · 1 finding/);
    assert.ok(text.includes('<b>the test</b> is wrong'), text);
    assert.equal(await v.locator('b').count(), 0, 'a finding is text, never markup');
    await shot('run-verdict-findings');
  });

  // A task's panel shows its latest attempt: the judge's repair attempt was told its verdict
  // could not be read, and that is the prompt shown (the first attempt's was).
  test('a task panel shows the latest attempt\'s prompt', async () => {
    const goal = 'check it [fake:append=work.txt:x\\n][fake:verdict=missing][fake:verdict-repair=pass]';
    const r = await call('team.run', { goal, cwd: d.work, runtime: 'fake', team: 'fast-fix' });
    await openRun(r.runId);
    await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 120_000 });
    const judge = (await call('team.status', { runId: r.runId })).tasks.find((t) => t.id === '03_verify');
    assert.equal(judge.attempts, 2, JSON.stringify(judge));
    await page.locator('#dag .node[data-task="03_verify"]').click();
    await page.locator('#task-panel h2', { hasText: '03_verify' }).waitFor();
    const promptPart = page.locator('#task-panel details[data-part="prompt"]');
    await promptPart.locator('summary').click();
    assert.match(await promptPart.innerText(), /Your previous verdict could not be read/);
  });

  test('a long transcript shows its end and says what is left out', async () => {
    const r = await call('team.run', { goal: 'talk a lot [fake:chatty=1MB]', cwd: d.work, runtime: 'fake', agent: 'explorer' });
    await openRun(r.runId);
    await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 120_000 });
    const task = (await call('team.status', { runId: r.runId })).tasks[0];
    await page.locator(`#dag .node[data-task="${task.id}"]`).click();
    await page.locator('#task-panel h2', { hasText: task.id }).waitFor();
    const part = page.locator('#task-panel details[data-part="transcript"]');
    if (!(await part.getAttribute('open'))) await part.locator('summary').click();
    const hint = await part.locator('p.cut').innerText();
    assert.match(hint, /^Shown: \d+ of \d+ bytes \(its first \d+ bytes are left out\); all of it: crewctl cat \S+ transcripts\//, hint);
    // The end of the attempt (its final answer) is what shows, not the start of its chatter.
    const items = part.locator('ol.transcript li');
    assert.match(await items.last().innerText(), /fake-agent: done with/);

    // A last line longer than what is read (a 200 KB answer, in lines of ~400 KB): it shows.
    writeFileSync(path.join(d.work, 'one-line.txt'), `${'y'.repeat(200_000)}END-OF-IT`);
    const r2 = await call('team.run', { goal: 'quote [fake:cat=one-line.txt]', cwd: d.work, runtime: 'fake', agent: 'explorer' });
    await openRun(r2.runId);
    await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 120_000 });
    const task2 = (await call('team.status', { runId: r2.runId })).tasks[0];
    await page.locator(`#dag .node[data-task="${task2.id}"]`).click();
    await page.locator('#task-panel h2', { hasText: task2.id }).waitFor();
    const part2 = page.locator('#task-panel details[data-part="transcript"]');
    if (!(await part2.getAttribute('open'))) await part2.locator('summary').click();
    await part2.locator('p.cut').waitFor();
    const shown = await part2.innerText();
    assert.doesNotMatch(shown, /Nothing yet/, shown.slice(0, 500));
    assert.match(shown, /yyyy/);
  });

  test('approve a plan from the page', async () => {
    const r = await call('team.run', { goal: 'Refactor the parser', cwd: d.work, runtime: 'fake', requirePlanApproval: true });
    await openRun(r.runId);
    await page.locator('main[data-run-status="blocked"]').waitFor();
    await page.locator('.blocked', { hasText: 'approve the plan' }).waitFor();
    // What is to be approved is on the page without a click: the planner's plan, whole.
    const plan = await call('team.artifact', { runId: r.runId, name: 'shared/plan.md' });
    const shownPlan = page.locator('#plan-to-approve pre.plan');
    await shownPlan.waitFor();
    assert.equal((await shownPlan.innerText()).trim(), plan.content.trim());
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
    // Where crew's box lets the fake planner read it (the home's caches; a file beside the work
    // tree is outside the box).
    const fixtures = path.join(d.home, '.cache', 'crew-test-fixtures');
    mkdirSync(fixtures, { recursive: true });
    const blockFile = path.join(fixtures, 'fanout-block.json');
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

  test('typed text survives the run working around it; an empty answer is refused by page and API', async () => {
    // Two tasks side by side: one asks, the other works for a while, sending progress.
    const conf = path.join(d.home, '.config', 'crew');
    mkdirSync(path.join(conf, 'teams'), { recursive: true });
    mkdirSync(path.join(conf, 'workflows'), { recursive: true });
    writeFileSync(path.join(conf, 'teams', 'pair.team.md'),
      '---\nname: pair\ndefaultWorkflow: pair\nmaxConcurrency: 2\n---\n\n- executor: agent=executor\n');
    writeFileSync(path.join(conf, 'workflows', 'pair.workflow.md'),
      '---\nname: pair\n---\n\n## ask\nrole: executor\n\nAsk first. [fake:ask=Which backend: redis or memory?]\n\n' +
      '## work\nrole: executor\n\nWork on. [fake:turns=60][fake:sleep=20s][fake:tokens=6000]\n');
    const r = await call('team.run', { goal: 'Add a cache', cwd: d.work, runtime: 'fake', team: 'pair' });
    await openRun(r.runId);
    await page.locator('#dag .node[data-task="01_ask"][data-status="waiting"]').waitFor();
    await page.locator('#dag .node[data-task="02_work"][data-status="running"]').waitFor();
    // Live on the timeline: the asking attempt ended waiting, the working one is running.
    await page.locator('#timeline rect.bar[data-task="01_ask"][data-status="waiting"]').waitFor();
    const workBar = page.locator('#timeline rect.bar[data-task="02_work"][data-status="running"]');
    await workBar.waitFor();
    const w0 = Number(await workBar.getAttribute('width'));
    const delivered = () => page.evaluate((runId) => [...window.crewRpc.subs].find((s) => s.runId === runId).seqs.length, r.runId);

    // Steer: the working task's own progress redraws its panel; the box is left alone.
    await page.locator('#dag .node[data-task="02_work"]').click();
    const steer = page.locator('#steer');
    await steer.waitFor();
    await steer.click();
    const before = await delivered();
    const steerText = 'Prefer the standard library over new crates.';
    await steer.pressSequentially(steerText, { delay: 60 });
    assert.equal(await steer.inputValue(), steerText);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'steer', 'the box kept the focus');
    assert.ok(await delivered() > before + 2, 'events arrived (and were drawn) while typing');
    await shot('steer-typed-while-running');

    // Answer: another task of the run works while the answer is typed at a person's pace.
    await page.locator('#dag .node[data-task="01_ask"]').click();
    await page.locator('#task-panel .question', { hasText: 'Which backend' }).waitFor();
    const answer = page.locator('#answer');
    // Empty: the page says so and sends nothing; the task still waits.
    await page.locator('#task-panel form[data-form="answer"] button[type="submit"]').click();
    await page.locator('#msg [role="alert"]', { hasText: 'empty answer' }).waitFor();
    assert.equal((await call('team.status', { runId: r.runId })).tasks.find((t) => t.id === '01_ask').status, 'waiting');
    await answer.click();
    const typedBefore = await delivered();
    const sentence = 'memory, because the data is small';
    await answer.pressSequentially(sentence.slice(0, 12), { delay: 90 });
    // Select a word and type over it: the selection survives redraws as the text does.
    await page.evaluate(() => { const a = /** @type {HTMLTextAreaElement} */ (document.getElementById('answer')); a.setSelectionRange(0, 6); });
    await page.waitForFunction((n) => [...window.crewRpc.subs].some((s) => s.seqs.length > n + 2), typedBefore);
    assert.deepEqual(await answer.evaluate((a) => [a.selectionStart, a.selectionEnd]), [0, 6], 'the selection survived');
    await answer.press('End');
    await answer.pressSequentially(sentence.slice(12), { delay: 90 });
    assert.equal(await answer.inputValue(), sentence);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'answer');
    assert.ok(await delivered() > typedBefore + 4, 'the other task worked while the answer was typed');
    await shot('answer-typed-while-another-works');
    await page.locator('#task-panel form[data-form="answer"] button[type="submit"]').click();
    await page.waitForFunction(() => document.querySelector('#dag .node[data-task="01_ask"]')?.getAttribute('data-status') !== 'waiting');
    const asked = (await call('team.events', { runId: r.runId, afterSeq: 0, limit: 1000 })).events
      .filter((e) => e.type === 'task.queued' && e.taskId === '01_ask' && e.data?.answer !== undefined);
    assert.deepEqual(asked.map((e) => e.data.answer), [sentence]);

    // The API refuses an empty answer and an empty steer whatever sends them.
    for (const [method, message] of [['team.respond', ''], ['team.respond', '  \n'], ['team.steer', ' ']]) {
      await assert.rejects(call(method, { runId: r.runId, taskId: method === 'team.respond' ? '01_ask' : '02_work', message }), /empty/);
    }
    // The running bar grew with the clock; cancelled, it says so.
    assert.ok(Number(await workBar.getAttribute('width')) >= w0);
    await call('team.cancel', { runId: r.runId }).catch(() => null);
    // Its last bar ends as the task did (cancelled, or completed if it finished first).
    await page.waitForFunction(() => {
      const bars = [...document.querySelectorAll('#timeline rect.bar[data-task="02_work"]')];
      return bars.length > 0 && bars[bars.length - 1].getAttribute('data-status') !== 'running';
    });
    const work = (await call('team.status', { runId: r.runId })).tasks.find((t) => t.id === '02_work');
    const last = await page.locator('#timeline rect.bar[data-task="02_work"]').last().getAttribute('data-status');
    assert.equal(last, work.status);
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
    // Remove takes the schedule away and leaves the run it started going.
    const job = await call('schedule.add', { name: 'long-one', cron: '0 4 * * *', timezone: 'UTC', run: { goal: 'Work long [fake:sleep=30s]', cwd: d.work, runtime: 'fake', team: 'review' } });
    const { runId } = await call('schedule.trigger', { id: job.id });
    for (let i = 0; (await call('team.status', { runId })).run.status !== 'running'; i++) {
      assert.ok(i < 600, 'the scheduled run never ran');
      await new Promise((r) => setTimeout(r, 50));
    }
    await page.reload();
    await page.locator(`article.job[data-job="${job.id}"] button[data-action="schedule.remove"]`).click();
    await page.locator(`article.job[data-job="${job.id}"]`).waitFor({ state: 'detached' });
    // A cancel would end it within a second or two (its one worker stops); it goes on.
    const w = await call('team.wait', { runId, timeoutMs: 3000 });
    assert.equal(w.finished, false, JSON.stringify(w));
    await call('team.cancel', { runId });
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

    // The short ids the list shows are the ones `crewctl ls` prints for the same runs, and
    // each names its run when typed into crewctl.
    await page.goto(`${base}/#/`);
    await page.reload();
    await page.locator('#filter-team').waitFor();
    assert.equal(await page.locator('#filter-team').inputValue(), '', 'all teams listed');
    await page.locator('table.runs tbody tr[data-run]').first().waitFor();
    const shown = await page.locator('table.runs tbody tr[data-run]').evaluateAll((trs) =>
      trs.map((tr) => [tr.getAttribute('data-run'), tr.querySelector('a.run-id')?.textContent]));
    const ls = execFileSync(CREWCTL, ['--socket', d.socket, 'ls', '-n', String(shown.length)], { env, encoding: 'utf8' });
    const printed = ls.split('\n').map((l) => l.trim().split(/\s+/)[0]).filter((t) => /^[0-9a-f]{8,16}$/.test(t));
    assert.deepEqual(shown.map(([, s]) => s), printed.slice(0, shown.length), ls);
    // Each run's progress strip: a segment per status, as many tasks as the API counts.
    const all = await call('team.list', { limit: 50 });
    for (const run of all.runs.slice(0, shown.length)) {
      const segs = await page.locator(`tr[data-run="${run.id}"] .strip > span`).evaluateAll((ss) => ss.map((x) => [x.getAttribute('data-status'), Number(x.getAttribute('data-count'))]));
      assert.equal(segs.reduce((n, [, c]) => n + c, 0), run.tasks.total, run.id);
      assert.equal(segs.find(([s]) => s === 'completed')?.[1] ?? 0, run.tasks.completed, run.id);
    }
    for (const [id, short] of shown.slice(0, 3)) {
      const st = JSON.parse(execFileSync(CREWCTL, ['--socket', d.socket, '--json', 'status', short], { env, encoding: 'utf8' }));
      assert.equal(st.run.id, id);
    }
  });

  test('a step with candidates shows them side by side: diffstat, checks, the choice and the judge\'s reasons', async () => {
    const repo = path.join(path.dirname(d.work), 'cands-repo');
    mkdirSync(repo, { recursive: true });
    const git = (...args) => execFileSync('git', args, { cwd: repo, env: { ...process.env, GIT_AUTHOR_NAME: 'u', GIT_AUTHOR_EMAIL: 'u@u', GIT_COMMITTER_NAME: 'u', GIT_COMMITTER_EMAIL: 'u@u' } });
    git('init', '-q', '-b', 'main');
    writeFileSync(path.join(repo, 'README'), 'hello\n');
    git('add', '-A');
    git('commit', '-qm', 'init');
    // A user team (trusted: its verification command runs): candidate 3 fails the check,
    // 1 and 2 pass, and the reviewer judges, choosing 2. Candidate 1's check output holds
    // markup: it must show as text.
    const conf = path.join(d.home, '.config', 'crew');
    mkdirSync(path.join(conf, 'teams'), { recursive: true });
    mkdirSync(path.join(conf, 'workflows'), { recursive: true });
    writeFileSync(path.join(conf, 'teams', 'cands.team.md'), '---\nname: cands\ndefaultWorkflow: cands\n---\n\n- executor: agent=executor\n- reviewer: agent=reviewer\n');
    writeFileSync(path.join(conf, 'workflows', 'cands.workflow.md'),
      '---\nname: cands\n---\n\n## build\nrole: executor\ncandidates: 3\nverifyCommands: test -f ok.txt\n\n'
      + '[fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:ok.txt:two\\n][fake:cand-write=2:more.txt:a\\nb\\n]'
      + '[fake:cand-write=3:bad.txt:<b id="cand-injected">bad</b>\\n][fake:choice=2]\n');
    const r = await call('team.run', { goal: 'make it', cwd: repo, runtime: 'fake', team: 'cands', workspace: 'worktree' });
    await openRun(r.runId);
    await page.locator('main[data-run-status="completed"]').waitFor();
    const st = await call('team.status', { runId: r.runId });
    const sel = st.tasks.find((t) => t.id === '01_build');
    assert.equal(sel.candidates.choice.index, 2);
    // The DAG: the candidates drawn as a group of their step (dashed, each its index and
    // whether it passed), the step's node with the choice.
    for (let k = 1; k <= 3; k++) {
      const node = page.locator(`#dag .node.candidate[data-task="_cand-01_build-${k}"]`);
      assert.equal(await node.getAttribute('data-candidate-of'), '01_build');
      assert.match(await node.locator('.node-usage').textContent(), new RegExp(`^cand ${k}.*${k === 3 ? 'out' : 'passed'}$`));
    }
    assert.equal(await page.locator('#dag .node[data-task="01_build"] .node-usage').textContent(), 'chose 2 (judge)');
    await page.locator('#dag .node[data-task="01_build"]').click();
    const box = page.locator('#task-candidates');
    await box.waitFor();
    // One column per candidate, in order, each with the API's diffstat and checks.
    const cols = box.locator('.candidate-grid > .candidate');
    assert.equal(await cols.count(), 3);
    for (let k = 1; k <= 3; k++) {
      const row = st.tasks.find((t) => t.id === `_cand-01_build-${k}`);
      const col = box.locator(`.candidate[data-index="${k}"]`);
      const text = await col.innerText();
      const ds = row.candidates.diffstat;
      assert.ok(text.includes(`+${ds.insertions} -${ds.deletions}`), text);
      assert.equal(await col.getAttribute('data-passed'), String(k !== 3), text);
      if (k === 3) {
        assert.ok(text.includes('1 check failed'), text);
        assert.ok(text.includes('test -f ok.txt'), text);
      } else {
        assert.ok(text.includes('checks passed'), text);
      }
    }
    // Side by side: the columns share a row.
    const tops = await cols.evaluateAll((cs) => cs.map((c) => Math.round(c.getBoundingClientRect().top)));
    assert.equal(new Set(tops).size, 1, `columns at ${tops}`);
    assert.match(await box.locator('.candidate.chosen h3').innerText(), /Candidate 2/);
    const why = await box.locator('.choice').innerText();
    assert.ok(why.includes('by judge') && why.includes(sel.candidates.choice.reason), why);
    assert.equal(await page.locator('#cand-injected').count(), 0, 'nothing a candidate wrote is markup');
    // The step's usage counts its candidates'.
    const meta = await page.locator('#task-panel .panel-head .meta').first().innerText();
    assert.ok(meta.includes(`${(sel.usage.input + sel.usage.output).toLocaleString()} tokens`), meta);
    await shot('task-candidates');
    // A candidate's own panel shows the same group.
    await page.locator('#dag .node[data-task="_cand-01_build-3"]').click();
    await page.locator('#task-candidates .candidate[data-index="3"]').waitFor();
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
