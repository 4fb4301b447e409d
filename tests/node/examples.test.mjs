// proto-docs/examples.md holds one example per API method. This test keeps it honest: every
// method of openrpc.json has an example, every documented request and answer matches the
// published schemas, and the curl commands really work against a real daemon (each run after
// putting the daemon in the state the method needs, with the example ids swapped for real ones).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { CrewClient, httpCall } from './crew-client.mjs';
import { check, checkParams } from './schema.mjs';
import { REPO, startDaemon } from './daemon.mjs';

const OPENRPC = JSON.parse(readFileSync(path.join(REPO, 'proto-docs', 'openrpc.json'), 'utf8'));
const SCHEMAS = OPENRPC.components.schemas;
const METHODS = new Map(OPENRPC.methods.map((m) => [m.name, m]));
const EXAMPLES_MD = path.join(REPO, 'proto-docs', 'examples.md');

// What the examples use in place of real ids and paths.
const RUN_ID = /team_\d{14}_[0-9a-f]{16}/g;
const SCHEDULE_ID = /sched_[0-9a-f]{16}/g;
const PROJECT = '/home/me/src/app';

/**
 * Sections of examples.md: `### \`method\`` starts a method's section, `## Errors` the errors
 * section; each fenced block is kept with the label line (ending in `:`) just before it.
 */
export function parseExamples(text) {
  const sections = new Map();
  let current = null;
  let label = '';
  let fence = null;
  for (const line of text.split('\n')) {
    if (fence) {
      if (line.startsWith('```')) {
        current?.blocks.push(fence);
        fence = null;
      } else {
        fence.body += `${line}\n`;
      }
      continue;
    }
    const open = line.match(/^```(\w*)\s*$/);
    if (open) {
      fence = { lang: open[1], label, body: '' };
      label = '';
      continue;
    }
    const h3 = line.match(/^### `([^`]+)`\s*$/);
    const h2 = line.match(/^## (.+)$/);
    if (h3 || h2) {
      const name = h3 ? h3[1] : h2[1].trim();
      current = h3 || name === 'Errors' ? { name, blocks: [] } : null;
      if (current) {
        assert.ok(!sections.has(name), `examples.md: two sections for ${name}`);
        sections.set(name, current);
      }
      label = '';
    } else if (line.trim() !== '') {
      label = line.trim().endsWith(':') ? line.trim() : '';
    }
  }
  return sections;
}

/** The JSON body of `-d '...'` in a curl command, if any. */
function inlineBody(cmd) {
  const m = cmd.match(/ -d '([^']*)'/);
  return m ? JSON.parse(m[1]) : null;
}

function blocks(section, lang, labelStart) {
  return section.blocks.filter((b) => b.lang === lang && (labelStart === undefined || b.label.startsWith(labelStart)));
}

/** The documented request of a method's section (from curl, or a Request:/Send: block). */
function documentedRequest(section) {
  for (const b of blocks(section, 'sh')) {
    const body = inlineBody(b.body);
    if (body) return body;
  }
  const req = [...blocks(section, 'json', 'Request'), ...blocks(section, 'json', 'Send')][0];
  assert.ok(req, `${section.name}: no request (curl -d '...', or a "Request:" block)`);
  return JSON.parse(req.body);
}

function resultSchema(method) {
  return method.result?.schema ?? true;
}

function assertConforms(schema, value, what) {
  const errs = check(schema, value, SCHEMAS);
  assert.deepEqual(errs, [], `${what} does not match openrpc.json: ${JSON.stringify(value).slice(0, 400)}`);
}

const SECTIONS = parseExamples(readFileSync(EXAMPLES_MD, 'utf8'));

describe('examples.md covers the API', () => {
  test('every method of openrpc.json has an example, and nothing else does', () => {
    const documented = [...SECTIONS.keys()].filter((k) => k !== 'Errors');
    const missing = [...METHODS.keys()].filter((m) => !SECTIONS.has(m));
    const unknown = documented.filter((m) => !METHODS.has(m));
    assert.deepEqual(missing, [], `methods without an example in proto-docs/examples.md: ${missing.join(', ')}`);
    assert.deepEqual(unknown, [], `examples of methods the API does not have: ${unknown.join(', ')}`);
  });

  for (const [name, method] of METHODS) {
    test(`${name}: request and answer match the schemas`, () => {
      const section = SECTIONS.get(name);
      assert.ok(section, `no example for ${name}`);
      const subscription = Boolean(method['x-notification']);
      if (!subscription) {
        const curls = blocks(section, 'sh').filter((b) => b.body.includes('curl '));
        assert.ok(curls.length > 0, `${name}: no curl command`);
        for (const b of curls) {
          assert.match(b.body, /curl (-s )?--unix-socket "\$CREW_SOCKET" -H 'content-type: application\/json' /, name);
          assert.match(b.body, / http:\/\/localhost\//, name);
        }
      }
      const req = documentedRequest(section);
      assert.equal(req.jsonrpc, '2.0');
      assert.equal(req.method, name);
      assert.deepEqual(checkParams(method, req.params, SCHEMAS), [], `${name}: documented params`);

      const responses = blocks(section, 'json', 'Response');
      assert.ok(responses.length > 0, `${name}: no "Response:" block`);
      const res = JSON.parse(responses[0].body);
      assert.equal(res.error, undefined, `${name}: the example answer is an error`);
      if (subscription) {
        assert.ok(typeof res.result === 'number' || typeof res.result === 'string', `${name}: subscription id`);
        const notes = blocks(section, 'json', 'Notifications');
        assert.ok(notes.length > 0, `${name}: no "Notifications" block`);
        const lines = notes[0].body.split('\n').filter((l) => l.trim());
        assert.ok(lines.length > 0);
        for (const l of lines) {
          const n = JSON.parse(l);
          assert.equal(n.method, method['x-notification']);
          assert.equal(n.params.subscription, res.result);
          assertConforms(resultSchema(method), n.params.result, `${name} notification`);
        }
      } else {
        assertConforms(resultSchema(method), res.result, `${name} example answer`);
      }
    });
  }

  test('the errors section shows error answers with their codes', () => {
    const section = SECTIONS.get('Errors');
    assert.ok(section, 'no "## Errors" section');
    const answers = blocks(section, 'json', 'Response').map((b) => JSON.parse(b.body));
    assert.ok(answers.length > 0);
    for (const a of answers) assert.equal(typeof a.error?.code, 'number', JSON.stringify(a));
  });
});

function haveCurl() {
  return spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0;
}

describe('the examples work against a real crewd', { skip: haveCurl() ? false : 'curl is not installed' }, () => {
  /** @type {Awaited<ReturnType<typeof startDaemon>>} */
  let d;
  let cwd;
  /** @type {CrewClient} */
  let ws;
  // Runs in the states the examples need, filled in as the steps go.
  const ids = {};

  before(async () => {
    d = await startDaemon();
    cwd = mkdtempSync(path.join(tmpdir(), 'crew-examples-'));
    ws = await CrewClient.connect(d.socket);
  });

  after(async () => {
    await ws?.close();
    if (cwd) rmSync(cwd, { recursive: true, force: true });
    if (d) {
      await d.stop();
      d.cleanup();
    }
  });

  const call = (method, params) => httpCall(d.socket, method, params);
  const run = async (goal, extra = {}) => (await call('team.run', { goal, cwd: d.work, runtime: 'fake', ...extra })).runId;
  const waitStopped = (runId) => call('team.wait', { runId, timeoutMs: 60_000 });
  /** Resolves when the run has an event of `type` (e.g. its worker is running). */
  async function eventOf(runId, type) {
    const sub = await ws.subscribe('team.subscribe', { runId, afterSeq: 0 });
    try {
      for await (const ev of sub) if (ev.type === type) return ev;
    } finally {
      await sub.close();
    }
    throw new Error(`run ${runId} ended its events without ${type}`);
  }

  /** Run the shell commands of a section with the example ids replaced; the parsed answer. */
  function runExample(name, { runId, scheduleId, index = 0 } = {}) {
    const section = SECTIONS.get(name);
    const b = blocks(section, 'sh').filter((x) => x.body.includes('curl '))[index];
    assert.ok(b, `${name}: no curl command #${index}`);
    let cmd = b.body.replaceAll(PROJECT, d.work);
    if (runId) cmd = cmd.replace(RUN_ID, runId);
    if (scheduleId) cmd = cmd.replace(SCHEDULE_ID, scheduleId);
    const r = spawnSync('bash', ['-c', cmd], {
      cwd,
      env: { ...process.env, CREW_SOCKET: d.socket },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, `${name}: command failed (${r.status ?? r.signal}):\n${cmd}\n${r.stderr}`);
    // `... > file` keeps the answer in a file (team.export).
    const redirect = cmd.match(/>\s*(\S+)\s*$/);
    const text = (redirect ? readFileSync(path.resolve(cwd, redirect[1]), 'utf8') : r.stdout).trim();
    assert.ok(text, `${name}: no answer:\n${cmd}\n${r.stderr}`);
    return JSON.parse(text);
  }

  function expectResult(name, answer) {
    assert.equal(answer.error, undefined, `${name} answered an error: ${JSON.stringify(answer.error)}`);
    assertConforms(resultSchema(METHODS.get(name)), answer.result, `${name} live answer`);
    return answer.result;
  }

  const example = (name, opts) => expectResult(name, runExample(name, opts));

  test('daemon.ping, daemon.status', () => {
    assert.equal(example('daemon.ping').pid, d.pid);
    assert.equal(example('daemon.status').socket, d.socket);
  });

  test('rpc.discover serves proto-docs/openrpc.json', () => {
    assert.deepEqual(example('rpc.discover'), OPENRPC);
  });

  test('resource.list, resource.get, resource.validate, team.plan', () => {
    assert.ok(example('resource.list').teams.some((t) => t.name === 'default'));
    example('resource.get');
    assert.equal(example('resource.validate').ok, true);
    assert.ok(example('team.plan').tasks.length > 0);
  });

  test('team.run on the fake runtime, then the reads of a finished run', async () => {
    const started = example('team.run');
    ids.done = started.runId;
    const opts = { runId: ids.done };
    assert.deepEqual(example('team.wait', opts), { status: 'completed', finished: true });
    assert.equal(example('team.status', opts).run.status, 'completed');
    assert.ok(example('team.list').runs.some((r) => r.id === ids.done));
    assert.ok(example('team.events', opts).events.length > 0);
    const names = example('team.artifacts', opts).artifacts.map((a) => a.name);
    const documented = documentedRequest(SECTIONS.get('team.artifact')).params.name;
    assert.ok(names.includes(documented), `${documented} is not among ${names}`);
    assert.ok(example('team.artifact', opts).content.length > 0);
    assert.match(example('team.summary', opts).markdown, new RegExp(ids.done));
  });

  // Bounded: a subscription that replays nothing waits for live events forever.
  test('team.subscribe over a WebSocket, then team.unsubscribe', { timeout: 60_000 }, async () => {
    const section = SECTIONS.get('team.subscribe');
    const [subscribe, unsubscribe] = blocks(section, 'json', 'Send').concat(blocks(section, 'json', 'To end')).map((b) => b.body);
    const req = JSON.parse(subscribe.replace(RUN_ID, ids.done));
    // The documented `afterSeq` must still leave this finished run's `run.completed` to replay:
    // how many events a run has depends on timing (a `task.progress` is sent only when a worker
    // reports between two progress ticks), and a run of exactly that many left nothing.
    const { events } = await call('team.events', { runId: ids.done, afterSeq: 0, limit: 1000 });
    const completed = events.find((e) => e.type === 'run.completed');
    assert.ok(completed, `run ${ids.done} has no run.completed`);
    req.params.afterSeq = Math.min(req.params.afterSeq, completed.seq - 1);
    const sub = await ws.subscribe(req.method, req.params);
    let last = null;
    for await (const item of sub) {
      assertConforms(resultSchema(METHODS.get('team.subscribe')), item, 'team.event');
      assert.ok(item.seq > req.params.afterSeq, `seq ${item.seq} is not after ${req.params.afterSeq}`);
      last = item;
      if (item.type === 'run.completed') break;
    }
    assert.equal(last?.type, 'run.completed');
    // The documented unsubscribe frame, with this subscription's id. Sent once the
    // subscription has delivered: jsonrpsee (0.26) answers a subscribe before it registers the
    // subscription, so an unsubscribe sent the instant the id arrives can find nothing (false)
    // on a loaded machine.
    const unsub = JSON.parse(unsubscribe);
    const again = await ws.subscribe(req.method, req.params);
    await again.next();
    assert.equal(await ws.call(unsub.method, [again.id]), true);
  });

  test('team.steer, team.cancel and team.resume on a running run', async () => {
    const runId = await run('Example: a slow run [fake:sleep=30s]');
    await eventOf(runId, 'worker.spawned');
    assert.ok(['live', 'queued'].includes(example('team.steer', { runId }).delivered));
    assert.equal(example('team.cancel', { runId }).status, 'cancelled');
    assert.equal(example('team.resume', { runId }).status, 'running');
    await call('team.cancel', { runId });
    await waitStopped(runId);
  });

  test('team.retry on a failed run', async () => {
    const runId = await run('Example: a failing run [fake:fail]');
    assert.equal((await waitStopped(runId)).status, 'failed');
    assert.ok(example('team.retry', { runId }).requeuedTaskIds.length > 0);
    await waitStopped(runId);
    ids.failed = runId;
  });

  test('team.approve and team.reject on runs waiting for plan approval', async () => {
    for (const [name, want] of [['team.approve', 'running'], ['team.reject', 'cancelled']]) {
      const runId = await run(`Example: ${name}`, { requirePlanApproval: true });
      assert.equal((await waitStopped(runId)).status, 'blocked');
      assert.equal(example(name, { runId }).status, want);
      await waitStopped(runId);
    }
  });

  test('team.respond to a task waiting for an answer', async () => {
    const runId = await run('Example: a question [fake:ask=Which backend?]');
    await waitStopped(runId);
    const status = await call('team.status', { runId });
    const waiting = status.tasks.find((t) => t.status === 'waiting');
    assert.ok(waiting, JSON.stringify(status.tasks.map((t) => t.status)));
    const taskId = documentedRequest(SECTIONS.get('team.respond')).params.taskId;
    assert.equal(waiting.id, taskId, 'the example answers another task');
    example('team.respond', { runId });
    await call('team.cancel', { runId }).catch(() => {});
    await waitStopped(runId);
  });

  test('team.export to a file, then team.import of it after team.forget', async () => {
    const bundle = example('team.export', { runId: ids.done }).bundle;
    assert.equal(bundle.format, 'crew-run-bundle');
    await call('team.forget', { runId: ids.done });
    assert.equal(example('team.import').runId, ids.done);
    assert.equal((await call('team.status', { runId: ids.done })).run.status, 'completed');
  });

  test('team.forget and team.prune', () => {
    assert.deepEqual(example('team.forget', { runId: ids.failed }), {});
    example('team.prune');
  });

  test('schedule.* on one job', async () => {
    const job = example('schedule.add');
    const scheduleId = job.id;
    assert.ok(example('schedule.list').jobs.some((j) => j.id === scheduleId));
    assert.equal(example('schedule.get', { scheduleId }).id, scheduleId);
    example('schedule.update', { scheduleId });
    assert.equal(example('schedule.disable', { scheduleId }).enabled, false);
    assert.equal(example('schedule.enable', { scheduleId }).enabled, true);
    const fired = example('schedule.trigger', { scheduleId });
    await waitStopped(fired.runId);
    example('schedule.remove', { scheduleId });
    assert.ok(example('schedule.preview').fireTimes.length > 0);
  });

  test('cache.stats, cache.invalidate, cache.clear', () => {
    example('cache.stats');
    example('cache.invalidate', { runId: ids.done });
    example('cache.clear');
  });

  test('the documented errors', () => {
    const section = SECTIONS.get('Errors');
    const cmds = blocks(section, 'sh');
    const answers = blocks(section, 'json', 'Response').map((b) => JSON.parse(b.body));
    assert.equal(cmds.length, answers.length, 'one answer per command');
    cmds.forEach((b, i) => {
      const cmd = b.body.replaceAll(PROJECT, d.work);
      const r = spawnSync('bash', ['-c', cmd], { env: { ...process.env, CREW_SOCKET: d.socket }, encoding: 'utf8', timeout: 60_000 });
      const got = JSON.parse(r.stdout);
      assert.equal(got.error?.code, answers[i].error.code, `${cmd}\n${r.stdout}`);
      assert.equal(got.error?.message, answers[i].error.message);
    });
  });

  test('daemon.shutdown stops the daemon', async () => {
    assert.deepEqual(example('daemon.shutdown'), {});
    const exit = await d.exited;
    assert.equal(exit.code, 0, d.log());
  });
});
