// Dashboard benchmark (`make bench-ui`): in headless chromium against the real crewd (fake
// runtime), a 200-task run against a 4-task run measured in the same process:
//   1. time from `team.run` to the run's DAG being drawn (every node on the page);
//   2. delay from a task event being published (its `time`) to its node changing colour, with
//      the 200-task run paced at about 100 status events a second (CONCURRENCY, SLEEP_MS).
// Prints absolute figures, the ratios and the machine's load. No assertion on time.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

import { startDaemon } from '../node/daemon.mjs';
import { httpCall } from '../node/crew-client.mjs';

const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
const CREWCTL = process.env.CREWCTL_BIN ?? path.resolve('../../target/debug/crewctl');
const ROUNDS = Number(process.env.ROUNDS ?? 5);

/** A workflow of `n` explorer steps in layers of `width`, each depending on two of the layer before. */
function wideWorkflow(n, width) {
  const lines = ['---', 'name: wide', 'description: benchmark DAG', '---', ''];
  for (let i = 0; i < n; i++) {
    lines.push(`## s${i}`, 'role: explorer');
    const layer = Math.floor(i / width);
    if (layer > 0) {
      const a = (layer - 1) * width + (i % width);
      const b = (layer - 1) * width + ((i + 1) % width);
      lines.push(`dependsOn: s${a}, s${b}`);
    }
    lines.push('', `Step ${i} of {goal}`, '');
  }
  return lines.join('\n');
}

// The 200-task run's pace: CONCURRENCY tasks of SLEEP_MS each give at most
// 2 * CONCURRENCY / SLEEP_MS status events per ms (started + completed): 20 of 400 ms, 100/s;
// the DAG's layers are CONCURRENCY wide so that many can run at once.
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 20);
const SLEEP_MS = Number(process.env.SLEEP_MS ?? 400);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

// The default caps (8 workers) would hold the paced run below CONCURRENCY.
const root = mkdtempSync(path.join(os.tmpdir(), 'crew-bench-ui-'));
mkdirSync(path.join(root, 'home', '.config', 'crew'), { recursive: true });
writeFileSync(path.join(root, 'home', '.config', 'crew', 'config.toml'), `max_workers = ${CONCURRENCY}\nmax_concurrency_cap = ${CONCURRENCY}\n`);
const d = await startDaemon({ root });
const project = path.join(d.work, 'proj');
mkdirSync(path.join(project, '.crew', 'workflows'), { recursive: true });
mkdirSync(path.join(project, '.git'), { recursive: true });
writeFileSync(path.join(project, '.crew', 'workflows', 'wide.workflow.md'), wideWorkflow(200, Math.max(1, CONCURRENCY)));
const ui = spawn(CREWCTL, ['--socket', d.socket, 'ui', '--no-open'], { env: { ...process.env, HOME: d.home }, stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve) => {
  let out = '';
  ui.stdout.on('data', (c) => { out += c; if (out.includes('\n')) resolve(out.split('\n')[0].trim()); });
});
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
await page.goto(url);
await page.locator('#conn[data-state="up"]').waitFor();

/** ms from the `team.run` call (in the page) to every node of the run drawn. */
async function timeToDag(params, n) {
  return page.evaluate(async ({ params, n }) => {
    const t0 = performance.now();
    const r = await window.crewRpc.call('team.run', params);
    location.hash = `#/run/${r.runId}`;
    await new Promise((resolve) => {
      const check = () => (document.querySelectorAll('#dag .node').length === n ? resolve(undefined) : requestAnimationFrame(check));
      check();
    });
    return { ms: performance.now() - t0, runId: r.runId };
  }, { params, n });
}

/** Event → colour delays (ms) for one run watched from its start. */
async function colourDelays(params, n) {
  await page.evaluate(() => {
    window.__changes = [];
    window.__obs?.disconnect();
    window.__obs = new MutationObserver((ms) => {
      const now = Date.now();
      for (const m of ms) {
        const t = /** @type {Element} */ (m.target);
        if (m.attributeName === 'data-status' && t.classList?.contains('node')) window.__changes.push({ task: t.getAttribute('data-task'), status: t.getAttribute('data-status'), at: now });
      }
    });
    window.__obs.observe(document.body, { subtree: true, attributes: true, attributeFilter: ['data-status'] });
  });
  const { runId } = await timeToDag(params, n);
  await page.locator('main[data-run-status="completed"]').waitFor({ timeout: 300_000 });
  const changes = await page.evaluate(() => window.__changes);
  const events = [];
  let afterSeq = 0;
  for (;;) {
    const res = await httpCall(d.socket, 'team.events', { runId, afterSeq, limit: 1000 });
    events.push(...res.events);
    if (res.events.length < 1000) break;
    afterSeq = res.nextSeq;
  }
  const of = { 'task.started': 'running', 'task.completed': 'completed' };
  const delays = [];
  const status = events.filter((e) => of[e.type]);
  for (const e of status) {
    const c = changes.find((x) => x.task === e.taskId && x.status === of[e.type]);
    if (c) delays.push(c.at - Date.parse(e.time));
  }
  const span = (Date.parse(status.at(-1).time) - Date.parse(status[0].time)) / 1000;
  return { delays, rate: status.length / Math.max(span, 0.001) };
}

const small = { goal: 'bench [fake:sleep=150ms]', cwd: project, runtime: 'fake' };
const big = { ...small, goal: `bench [fake:sleep=${SLEEP_MS}ms]`, workflow: 'wide', concurrency: CONCURRENCY };
const drawSmall = [];
const drawBig = [];
// Only drawing is measured here: each run is cancelled once drawn, so none of them competes
// for workers with the paced run below.
const drawn = async (params, n) => {
  const r = await timeToDag(params, n);
  await httpCall(d.socket, 'team.cancel', { runId: r.runId });
  return r.ms;
};
for (let i = 0; i < ROUNDS; i++) {
  drawSmall.push(await drawn(small, 4));
  drawBig.push(await drawn(big, 200));
}
const cSmall = await colourDelays(small, 4);
const cBig = await colourDelays(big, 200);
console.log(`load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} on ${os.cpus().length} cpus`);
console.log(`team.run → DAG drawn, median of ${ROUNDS}: 4 tasks ${median(drawSmall).toFixed(1)} ms, 200 tasks ${median(drawBig).toFixed(1)} ms, ratio ${(median(drawBig) / median(drawSmall)).toFixed(2)}`);
console.log(`event → node colour: 4 tasks (${cSmall.rate.toFixed(0)} status events/s) median ${median(cSmall.delays)} ms p95 ${pct(cSmall.delays, 0.95)} ms; 200 tasks (${cBig.rate.toFixed(0)} status events/s) median ${median(cBig.delays)} ms p95 ${pct(cBig.delays, 0.95)} ms; median ratio ${(median(cBig.delays) / Math.max(1, median(cSmall.delays))).toFixed(2)}`);
await browser.close();
ui.kill('SIGINT');
await d.stop();
d.cleanup();
