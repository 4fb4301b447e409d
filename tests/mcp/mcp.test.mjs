// MCP conformance of `crewctl mcp`, driven by the official TypeScript SDK over stdio against
// the real crewd (fake runtime): the tool list and every input schema, a call of each tool,
// progress notifications while a run is waited on, and errors as tool errors carrying the
// API's message.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startDaemon, REPO } from '../node/daemon.mjs';

const TOOLS = [
  'team_run', 'team_wait', 'team_status', 'team_result', 'team_list', 'resource_list', 'team_plan',
  'team_cancel', 'team_resume', 'team_steer', 'team_respond', 'team_approve', 'team_reject',
  'team_diff', 'team_apply',
];

function crewctlBin() {
  const bin = process.env.CREWCTL_BIN
    ? path.resolve(process.env.CREWCTL_BIN)
    : path.join(REPO, 'target', 'debug', 'crewctl');
  if (!existsSync(bin)) throw new Error(`crewctl not found at ${bin}: cargo build --workspace --bins, or set CREWCTL_BIN`);
  return bin;
}

/** An SDK client talking to a fresh `crewctl mcp` whose socket is `socket`. */
async function connect(socket, cwd) {
  const transport = new StdioClientTransport({
    command: crewctlBin(),
    args: ['mcp'],
    env: { CREW_SOCKET: socket, NO_COLOR: '1' },
    cwd,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c.toString(); });
  const client = new Client({ name: 'crew-conformance', version: '0.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

/** A direct JSON-RPC call to crewd, to compare the MCP server's errors with the API's. */
function rpc(socketPath, method, params) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: '/', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let data = '';
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve(JSON.parse(data)));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

let d;
let mcp;
const call = (name, args, opts) => mcp.client.callTool({ name, arguments: args }, undefined, opts);
const runArgs = (goal, extra = {}) => ({ goal, cwd: d.work, runtime: 'fake', ...extra });
const runIdOf = (t) => {
  const m = /Run (\S+) started/.exec(t);
  assert.ok(m, `no run id in: ${t}`);
  return m[1];
};

before(async () => {
  d = await startDaemon();
  mcp = await connect(d.socket, d.work);
});

after(async () => {
  await mcp?.client.close();
  await d?.stop();
  d?.cleanup();
});

test('initialize names the server and offers tools', () => {
  assert.equal(mcp.client.getServerVersion()?.name, 'crew');
  assert.ok(mcp.client.getServerCapabilities()?.tools, 'tools capability');
  assert.match(mcp.client.getInstructions() ?? '', /team_run/);
});

test('every tool is listed with an input schema that compiles and validates', async () => {
  const { tools } = await mcp.client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  // schemars names the Rust integer and float widths; they are annotations here.
  for (const f of ['int64', 'uint64', 'int32', 'uint32', 'uint', 'int', 'double', 'float']) ajv.addFormat(f, true);
  for (const t of tools) {
    assert.ok(t.description && t.description.length > 20, `${t.name} has a description`);
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(t.inputSchema.additionalProperties, false, t.name);
    const validate = ajv.compile(t.inputSchema);
    assert.equal(validate({ surelyNotAField: 1 }), false, `${t.name} refuses unknown fields`);
  }
  const run = tools.find((t) => t.name === 'team_run');
  const v = ajv.compile(run.inputSchema);
  assert.ok(v({ goal: 'g', cwd: '/w', team: 'default', workflow: 'default', runtime: 'fake', budget: { tokens: 1000 }, wait: false }), JSON.stringify(v.errors));
  assert.equal(v({ cwd: '/w' }), false, 'goal is required');
  assert.equal(v({ goal: 'g', cwd: '/w', budget: { tokens: 'many' } }), false, 'budget.tokens is an integer');
  for (const k of ['goal', 'cwd', 'team', 'workflow', 'agent', 'role', 'chain', 'skills', 'runtime', 'budget', 'wait', 'timeoutMs']) {
    assert.ok(k in run.inputSchema.properties, `team_run has ${k}`);
  }
});

test('resource_list and team_plan', async () => {
  const r = await call('resource_list', {});
  assert.ok(!r.isError, text(r));
  assert.match(text(r), /Teams:\n(.|\n)*- default \(builtin\)/);
  assert.match(text(r), /Agents:(.|\n)*- executor/);
  const p = await call('team_plan', runArgs('Plan only', { team: 'default' }));
  assert.ok(!p.isError, text(p));
  assert.match(text(p), /Team default \/ workflow default/);
  assert.match(text(p), /- \S+ \[executor = executor\]/);
});

test('a run waited on sends progress and returns its result; status, result, list follow it', async () => {
  const progress = [];
  const r = await call('team_run', runArgs('Add a --verbose flag', { team: 'default' }), {
    onprogress: (p) => progress.push(p),
    resetTimeoutOnProgress: true,
  });
  const t = text(r);
  assert.ok(!r.isError, t);
  assert.match(t, /# Run (\S+)/);
  assert.match(t, /\*\*Status\*\*: completed/);
  assert.match(t, /## Final results/);
  assert.ok(progress.length >= 2, `progress notifications: ${JSON.stringify(progress)}`);
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress, 'progress increases');
  assert.ok(progress.some((p) => / started$/.test(p.message ?? '')), JSON.stringify(progress));
  assert.ok(progress.some((p) => /tasks done\] \S+ completed/.test(p.message ?? '')), JSON.stringify(progress));
  const runId = /# Run (\S+)/.exec(t)[1];

  const st = await call('team_status', { runId });
  assert.ok(!st.isError, text(st));
  assert.match(text(st), new RegExp(`Run ${runId}: completed`));
  const res = await call('team_result', { runId });
  assert.match(text(res), /## Final results/);
  const task = /- (\S+) \[/.exec(text(st).split('Tasks')[1])[1];
  const one = await call('team_result', { runId, taskId: task });
  assert.ok(!one.isError, text(one));
  assert.match(text(one), new RegExp(`Task ${task} \\[\\w+\\] completed`));
  const list = await call('team_list', {});
  assert.match(text(list), new RegExp(`- ${runId} \\[completed\\]`));
});

test('a run started without waiting is waited on with team_wait', async () => {
  const r = await call('team_run', runArgs('Detached run', { wait: false }));
  assert.ok(!r.isError, text(r));
  const runId = runIdOf(text(r));
  const progress = [];
  const w = await call('team_wait', { runId }, { onprogress: (p) => progress.push(p) });
  assert.ok(!w.isError, text(w));
  assert.match(text(w), /\*\*Status\*\*: completed/);
  assert.ok(progress.length >= 1, 'team_wait reports progress');
  // Waiting again on the finished run says where it stands once; its history is not replayed.
  const again = [];
  const w2 = await call('team_wait', { runId }, { onprogress: (p) => again.push(p) });
  assert.ok(!w2.isError, text(w2));
  assert.deepEqual(again.map((p) => p.message), [`[${/(\d+)\/\1 tasks done/.exec(again[0]?.message ?? '')?.[0] ?? '?'}] run is completed`], JSON.stringify(again));
});

test('a result larger than what is read shows its real end', async () => {
  const lines = [];
  for (let i = 0; i < 12000; i++) lines.push(`line ${String(i).padStart(6, '0')} of the big result`);
  lines.push('TAIL-MARKER-THE-REAL-END');
  writeFileSync(path.join(d.work, 'big.txt'), `${lines.join('\n')}\n`);
  const r = await call('team_run', runArgs('Quote [fake:cat=big.txt]', { team: 'research' }), { timeout: 120_000 });
  assert.ok(!r.isError, text(r));
  const runId = /# Run (\S+)/.exec(text(r))[1];
  const one = await call('team_result', { runId, taskId: '01_explore' });
  assert.ok(!one.isError, text(one));
  assert.match(text(one), /TAIL-MARKER-THE-REAL-END\s*$/);
  assert.match(text(one), /\n\[… \d+ bytes cut …\]\n/);
});

test('steer and cancel a running run while a call waits on it; resume it', async () => {
  let sawStart;
  const started = new Promise((resolve) => { sawStart = resolve; });
  const waiting = call('team_run', runArgs('Slow work [fake:sleep=60s]', { team: 'default' }), {
    onprogress: (p) => { if (/ started$/.test(p.message ?? '')) sawStart(p.message); },
    resetTimeoutOnProgress: true,
    timeout: 120_000,
  });
  const message = await started;
  const task = /\] (\S+) started$/.exec(message)[1];
  const list = await call('team_list', { status: 'running' });
  const runId = /- (\S+) \[running\]/.exec(text(list))[1];

  const s = await call('team_steer', { runId, taskId: task, message: 'use the small index' });
  assert.ok(!s.isError, text(s));
  assert.match(text(s), /Queued for task|Delivered live/);
  const c = await call('team_cancel', { runId, reason: 'test' });
  assert.ok(!c.isError, text(c));
  assert.match(text(c), /cancelled/);
  const r = await waiting;
  assert.match(text(r), /\*\*Status\*\*: cancelled/);
  assert.match(text(r), /team_resume/);

  const res = await call('team_resume', { runId });
  assert.ok(!res.isError, text(res));
  assert.match(text(res), /queued again: /);
  const c2 = await call('team_cancel', { runId });
  assert.ok(!c2.isError, text(c2));
});

test('plan approval: approve and reject', async () => {
  const r = await call('team_run', runArgs('Needs approval', { team: 'default', requirePlanApproval: true }));
  assert.match(text(r), /team_approve or team_reject/);
  const runId = /# Run (\S+)/.exec(text(r))[1];
  const a = await call('team_approve', { runId });
  assert.ok(!a.isError, text(a));
  const w = await call('team_wait', { runId });
  assert.match(text(w), /\*\*Status\*\*: completed/);

  const r2 = await call('team_run', runArgs('Reject me', { team: 'default', requirePlanApproval: true }));
  const run2 = /# Run (\S+)/.exec(text(r2))[1];
  const j = await call('team_reject', { runId: run2, reason: 'no' });
  assert.ok(!j.isError, text(j));
  assert.match(text(j), /cancelled/);
});

test('respond answers a task that asks', async () => {
  const r = await call('team_run', runArgs('Pick a database [fake:ask=Which DB?]', { team: 'default' }));
  const t = text(r);
  assert.match(t, /team_respond/);
  const runId = /# Run (\S+)/.exec(t)[1];
  const taskId = /Task (\S+) is waiting for an answer/.exec(t)[1];
  const a = await call('team_respond', { runId, taskId, message: 'Postgres' });
  assert.ok(!a.isError, text(a));
  assert.match(text(a), /Answered task/);
  await call('team_cancel', { runId });
});

test('a one-agent worktree run: team_diff shows its change, team_apply brings it into the branch', async () => {
  const repo = path.join(d.work, 'repo');
  mkdirSync(repo, { recursive: true });
  const git = (...args) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: repo, encoding: 'utf8' });
  git('init', '-q', '-b', 'main');
  writeFileSync(path.join(repo, 'README'), 'base\n');
  git('add', 'README');
  git('commit', '-q', '-m', 'base');
  const r = await call('team_run', {
    goal: 'Say hello [fake:write=hello.txt:hi from crew]', cwd: repo, runtime: 'fake',
    agent: 'executor', workspace: 'worktree', wait: false,
  });
  assert.ok(!r.isError, text(r));
  const runId = runIdOf(text(r));
  const w = await call('team_wait', { runId });
  assert.ok(!w.isError, text(w));
  const diff = await call('team_diff', { runId });
  assert.ok(!diff.isError, text(diff));
  assert.match(text(diff), new RegExp(`branch crew/${runId}, \\S+\\.\\.\\S+: 1 file\\(s\\) changed, \\+1 -0`));
  assert.match(text(diff), /```diff\n(.|\n)*\+hi from crew/);
  const stat = await call('team_diff', { runId, stat: true });
  assert.doesNotMatch(text(stat), /```diff/);
  assert.ok(!existsSync(path.join(repo, 'hello.txt')), 'nothing applied before team_apply');
  const applied = await call('team_apply', { runId });
  assert.ok(!applied.isError, text(applied));
  assert.match(text(applied), /Applied run \S+ into branch main of \S+ \((fast-forward|merge)\): 1 file\(s\), \+1 -0/);
  assert.equal(readFileSync(path.join(repo, 'hello.txt'), 'utf8'), 'hi from crew');
  // Refusals are tool errors with the API's message: a dirty tree.
  writeFileSync(path.join(repo, 'README'), 'changed\n');
  const again = await call('team_apply', { runId, squash: true });
  assert.equal(again.isError, true, text(again));
  const shared = await call('team_diff', { runId: 'r-does-not-exist' });
  assert.equal(shared.isError, true);
});

test('a chain of teams runs as one run', async () => {
  const r = await call('team_run', runArgs('Chain it', { chain: ['fast-fix', 'review'], wait: false }));
  assert.ok(!r.isError, text(r));
  const runId = runIdOf(text(r));
  const w = await call('team_wait', { runId });
  assert.ok(!w.isError, text(w));
  const st = await call('team_status', { runId });
  assert.match(text(st), /fast-fix\+review/);
});

test('errors are tool errors with the API message', async () => {
  const direct = await rpc(d.socket, 'team.status', { runId: 'r-does-not-exist' });
  assert.ok(direct.error, JSON.stringify(direct));
  const r = await call('team_status', { runId: 'r-does-not-exist' });
  assert.equal(r.isError, true);
  assert.equal(text(r), `${direct.error.message} (crewd error ${direct.error.code})`);

  const bad = await call('team_run', { goal: 'g', cwd: d.work, tema: 'default' });
  assert.equal(bad.isError, true);
  assert.match(text(bad), /unknown field `tema`/);

  const noTeam = await call('team_run', runArgs('x', { team: 'no-such-team' }));
  assert.equal(noTeam.isError, true);
  const directTeam = await rpc(d.socket, 'team.plan', runArgs('x', { team: 'no-such-team' }));
  assert.ok(text(noTeam).startsWith(directTeam.error.message), `${text(noTeam)} vs ${directTeam.error.message}`);

  await assert.rejects(call('no_such_tool', {}), /unknown tool/);

  // A wait crewd would refuse is refused before the run starts (the schema says so too): an
  // agent told "invalid" must not have a run going that it does not know of.
  const { tools } = await mcp.client.listTools();
  const runSchema = tools.find((t) => t.name === 'team_run').inputSchema;
  assert.equal(runSchema.properties.timeoutMs.maximum, 3600000, JSON.stringify(runSchema.properties.timeoutMs));
  const before = await rpc(d.socket, 'team.list', {});
  for (const timeoutMs of [7200000, -1]) {
    const long = await call('team_run', runArgs('too long a wait', { timeoutMs }));
    assert.equal(long.isError, true, text(long));
    assert.match(text(long), /nothing was started/);
  }
  const after = await rpc(d.socket, 'team.list', {});
  assert.equal(after.result.runs.length, before.result.runs.length, 'no run was started');
});

test('without crewd, a call is a tool error that says how to start it', async () => {
  const lonely = await connect(path.join(d.root, 'nothing-here.sock'), d.work);
  try {
    const { tools } = await lonely.client.listTools();
    assert.equal(tools.length, TOOLS.length, 'tools are listed without a daemon');
    const r = await lonely.client.callTool({ name: 'team_list', arguments: {} });
    assert.equal(r.isError, true);
    assert.match(text(r), /crewd is not running/);
  } finally {
    await lonely.client.close();
  }
});
