// What an editor extension does with crewd, against the real daemon: discover the socket, list
// teams, start a run, follow it over a WebSocket subscription rendering progress, cancel a run,
// and one-shot calls over HTTP. Plus the generated TypeScript types: no drift, and they compile.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { CrewClient, DaemonNotRunning, RpcError, discoverSocket, httpCall } from './crew-client.mjs';
import { ProgressView, formatDuration } from './progress.mjs';
import { check } from './schema.mjs';
import { HERE, REPO, startDaemon } from './daemon.mjs';

const OPENRPC = JSON.parse(readFileSync(path.join(REPO, 'proto-docs', 'openrpc.json'), 'utf8'));
const SCHEMAS = OPENRPC.components.schemas;

function assertConforms(schemaName, value) {
  const errs = check({ $ref: `#/components/schemas/${schemaName}` }, value, SCHEMAS);
  assert.deepEqual(errs, [], `${schemaName} does not match openrpc.json: ${JSON.stringify(value).slice(0, 500)}`);
}

/** Follow a subscription until the run stops; returns the rendered lines. */
async function follow(sub, view, onEvent = () => {}) {
  const lines = [];
  for await (const item of sub) {
    const line = view.apply(item);
    if (line !== null) lines.push(line);
    await onEvent(item);
    if (view.stopped) break;
  }
  return lines;
}

describe('socket discovery (SPEC §2)', () => {
  const cases = [
    { env: { CREW_SOCKET: '/x/y.sock', XDG_RUNTIME_DIR: '/run/user/7' }, want: '/x/y.sock' },
    { env: { XDG_RUNTIME_DIR: '/run/user/7' }, want: '/run/user/7/crew/crewd.sock' },
    { env: { CREW_SOCKET: '', XDG_RUNTIME_DIR: '/run/user/7' }, want: '/run/user/7/crew/crewd.sock' },
    { env: {}, want: '/tmp/crew-1234/crewd.sock' },
    { env: { XDG_RUNTIME_DIR: '' }, want: '/tmp/crew-1234/crewd.sock' },
  ];
  for (const c of cases) {
    test(JSON.stringify(c.env), () => {
      assert.equal(discoverSocket(c.env, 1234), c.want);
    });
  }
});

describe('progress rendering', () => {
  test('durations', () => {
    const cases = [[0, '0ms'], [999, '999ms'], [1500, '1.5s'], [61_000, '1m01s'], [-1, '?']];
    for (const [ms, want] of cases) assert.equal(formatDuration(ms), want, `${ms}`);
  });

  test('a replayed event is not shown twice', () => {
    const v = new ProgressView();
    const ev = { seq: 5, runSeq: 1, time: '2026-01-01T00:00:00Z', type: 'task.started', runId: 'r', taskId: 't1', data: { attempt: 1 } };
    assert.match(v.apply(ev), /▶ t1 started/);
    assert.equal(v.apply(ev), null);
  });
});

test('a missing daemon is reported as not running', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'crew-none-'));
  const sock = path.join(dir, 'crewd.sock');
  try {
    await assert.rejects(httpCall(sock, 'daemon.ping'), DaemonNotRunning);
    await assert.rejects(CrewClient.connect(sock), DaemonNotRunning);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('against a real crewd', () => {
  /** @type {Awaited<ReturnType<typeof startDaemon>>} */
  let d;
  /** @type {CrewClient} */
  let client;

  before(async () => {
    d = await startDaemon();
    client = await CrewClient.connect(discoverSocket({ CREW_SOCKET: d.socket }));
  });

  after(async () => {
    if (client) await client.close();
    if (!d) return;
    try {
      const exit = await d.stop();
      assert.equal(exit.code, 0, `crewd exit ${JSON.stringify(exit)}:\n${d.log()}`);
      assert.equal(existsSync(d.socket), false, 'crewd left its socket file behind');
    } finally {
      d.cleanup();
    }
  });

  test('HTTP: ping, status and typed errors', async () => {
    const ping = await httpCall(d.socket, 'daemon.ping');
    assertConforms('PingResult', ping);
    assert.equal(ping.pid, d.pid);
    const status = await httpCall(d.socket, 'daemon.status', {});
    assertConforms('DaemonStatus', status);
    assert.equal(status.socket, d.socket);
    assert.equal(status.stateDir, d.stateDir);

    const cases = [
      { method: 'no.such.method', params: {}, code: -32601 },
      { method: 'team.status', params: {}, code: -32602, field: 'runId' },
      { method: 'team.status', params: { runId: '../../etc/passwd' }, code: -32602, field: 'runId' },
      { method: 'team.status', params: { runId: 'team_20000101000000_0000000000000000' }, code: 1001 },
      { method: 'resource.get', params: { kind: 'team', name: 'no-such-team' }, code: 1001 },
    ];
    for (const c of cases) {
      await assert.rejects(httpCall(d.socket, c.method, c.params), (e) => {
        assert.ok(e instanceof RpcError, String(e));
        assert.equal(e.code, c.code, `${c.method} ${JSON.stringify(c.params)}: ${e.message}`);
        if (c.field) assert.equal(e.data?.field, c.field);
        return true;
      });
    }
  });

  test('an editor session: list teams, run, follow progress, read the result', async (t) => {
    const teams = await client.call('resource.list', { kind: 'team', cwd: d.work });
    assertConforms('ResourceListResult', teams);
    const names = teams.teams.map((x) => x.name);
    assert.ok(names.includes('default'), `teams: ${names}`);
    assert.equal(teams.teams.find((x) => x.name === 'default').source, 'builtin');

    const goal = 'Add a --verbose flag to the CLI';
    const plan = await client.call('team.plan', { goal, cwd: d.work, team: 'default', runtime: 'fake' });
    assertConforms('PlanResult', plan);
    assert.ok(plan.tasks.length > 0);

    const started = await client.call('team.run', { goal, cwd: d.work, team: 'default', runtime: 'fake' });
    assertConforms('RunStarted', started);
    assert.deepEqual(started.tasks.map((x) => x.id), plan.tasks.map((x) => x.id));

    const sub = await client.subscribe('team.subscribe', { runId: started.runId, afterSeq: 0 });
    const view = new ProgressView();
    const seqs = [];
    const lines = await follow(sub, view, (item) => {
      assertConforms('SubscriptionItem', item);
      assert.equal(item.runId, started.runId, 'an event of another run arrived');
      seqs.push(item.seq);
    });
    for (const line of lines) t.diagnostic(line);

    assert.equal(view.runStatus, 'completed', lines.join('\n'));
    assert.deepEqual([...seqs].sort((a, b) => a - b), seqs, 'events out of order');
    assert.equal(new Set(seqs).size, seqs.length, 'an event arrived twice');
    assert.match(lines[0], new RegExp(`^run ${started.runId}: "${goal}" \\(${started.tasks.length} tasks`));
    for (const task of started.tasks) {
      assert.ok(lines.some((l) => l.includes(`✓ ${task.id} completed`)), `no completion line for ${task.id}:\n${lines.join('\n')}`);
    }
    assert.match(lines.at(-1), new RegExp(`^run completed: ${started.tasks.length}/${started.tasks.length} tasks completed`));
    assert.equal(sub.ended, true, 'leaving the loop closes the subscription');

    // The rest is what an extension does with one-shot HTTP calls.
    const waited = await httpCall(d.socket, 'team.wait', { runId: started.runId, timeoutMs: 10_000 });
    assert.deepEqual(waited, { status: 'completed', finished: true });
    const status = await httpCall(d.socket, 'team.status', { runId: started.runId });
    assertConforms('StatusResult', status);
    assert.equal(status.run.status, 'completed');
    assert.ok(status.tasks.every((x) => x.status === 'completed'), JSON.stringify(status.tasks.map((x) => x.status)));
    const listed = await httpCall(d.socket, 'team.list', { limit: 10 });
    assert.ok(listed.runs.some((r) => r.id === started.runId));
    const artifacts = await httpCall(d.socket, 'team.artifacts', { runId: started.runId });
    assertConforms('ArtifactsResult', artifacts);
    const result = artifacts.artifacts.find((a) => a.kind === 'result');
    assert.ok(result, JSON.stringify(artifacts));
    const content = await httpCall(d.socket, 'team.artifact', { runId: started.runId, name: result.name });
    assertConforms('ArtifactResult', content);
    assert.equal(content.bytes, result.bytes);
    assert.ok(content.content.length > 0);
    const summary = await httpCall(d.socket, 'team.summary', { runId: started.runId });
    assert.match(summary.markdown, new RegExp(started.runId));
  });

  test('cancel a running run from the editor', async (t) => {
    const started = await client.call('team.run', {
      goal: 'Take your time [fake:sleep=5s]', cwd: d.work, runtime: 'fake',
    });
    const sub = await client.subscribe('team.subscribe', { runId: started.runId, afterSeq: 0 });
    const view = new ProgressView();
    let cancel = null;
    const lines = await follow(sub, view, async (item) => {
      // Cancel once a worker is really running, as a user pressing "stop" would.
      if (item.type === 'worker.spawned' && cancel === null) {
        cancel = await client.call('team.cancel', { runId: started.runId, reason: 'stopped from the editor' });
      }
    });
    for (const line of lines) t.diagnostic(line);
    assert.ok(cancel, 'no worker was spawned before the run stopped');
    assertConforms('CancelResult', cancel);
    assert.equal(cancel.status, 'cancelled');
    assert.ok(cancel.cancelledTaskIds.includes(started.tasks[0].id), JSON.stringify(cancel));
    assert.equal(view.runStatus, 'cancelled', lines.join('\n'));
    assert.match(lines.at(-1), /^run cancelled: 0\/\d+ tasks completed \(stopped from the editor\)/);

    const status = await httpCall(d.socket, 'team.status', { runId: started.runId });
    assert.equal(status.run.status, 'cancelled');
    assert.equal(status.tasks[0].status, 'cancelled');
    // Cancelling again is an invalid state, not a crash.
    await assert.rejects(client.call('team.cancel', { runId: started.runId }), (e) => e.code === 1002);
  });

  test('concurrent calls on one WebSocket are answered by id', async () => {
    const teams = (await client.call('resource.list', { kind: 'team' })).teams.map((x) => x.name);
    const calls = [];
    for (let i = 0; i < 25; i++) {
      const name = teams[i % teams.length];
      calls.push(client.call('resource.get', { kind: 'team', name }).then((r) => ({ want: name, got: r.resource.name })));
      calls.push(client.call('daemon.ping').then((r) => ({ want: d.pid, got: r.pid })));
    }
    for (const { want, got } of await Promise.all(calls)) assert.equal(got, want);
  });

  test('a subscription without runId sees other runs too, and unsubscribing ends it', async () => {
    const sub = await client.subscribe('team.subscribe', {});
    const run = await httpCall(d.socket, 'team.run', { goal: 'short', cwd: d.work, runtime: 'fake' });
    for await (const item of sub) {
      if (item.runId === run.runId && item.type === 'run.created') break;
    }
    assert.equal(sub.ended, true);
    assert.equal(await client.call('team.unsubscribe', [sub.id]), false, 'already unsubscribed');
    await httpCall(d.socket, 'team.wait', { runId: run.runId, timeoutMs: 60_000 });
  });
});

describe('TypeScript types (proto-docs/crew-api.d.ts)', () => {
  const tsc = path.join(HERE, 'node_modules', 'typescript', 'bin', 'tsc');

  test('match proto-docs/openrpc.json (regenerate with `make docs`)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crew-types-'));
    try {
      const out = path.join(dir, 'crew-api.d.ts');
      execFileSync(process.execPath, [path.join(REPO, 'proto-docs', 'gen-types.mjs'), '--out', out], { stdio: 'pipe' });
      const fresh = readFileSync(out, 'utf8');
      const committed = readFileSync(path.join(REPO, 'proto-docs', 'crew-api.d.ts'), 'utf8');
      assert.ok(fresh === committed, 'proto-docs/crew-api.d.ts is stale: run `make docs` (node proto-docs/gen-types.mjs)');
      for (const m of OPENRPC.methods) assert.ok(fresh.includes(`  ${JSON.stringify(m.name)}: {`), `no entry for ${m.name}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('tsc --noEmit accepts an extension using them and rejects misuse', () => {
    assert.ok(existsSync(tsc), `TypeScript is not installed: run \`npm ci\` in ${HERE}`);
    const r = spawnSync(process.execPath, [tsc, '--noEmit', '-p', path.join(HERE, 'tsconfig.json')], { encoding: 'utf8' });
    assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  });
});
