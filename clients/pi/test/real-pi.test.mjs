// The real `pi` with this extension loaded, its model a stub OpenAI-compatible server on
// 127.0.0.1: the stub calls the `team` tool with action "run"; the run happens on the real
// crewd (fake runtime); the run's report comes back into pi's conversation, which the stub sees
// in its next request.
//
// pi is installed by tests/pi/setup.sh into <repo>/.cache/pi (or $CREW_PI_DIR); without it the
// test is skipped, saying why.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startDaemon, REPO } from '../../../tests/node/daemon.mjs';

const PI_DIR = process.env.CREW_PI_DIR ?? path.join(REPO, '.cache', 'pi');
const PI = path.join(PI_DIR, 'node_modules', '.bin', 'pi');
const EXTENSION = path.join(REPO, 'clients', 'pi', 'index.ts');
const MODEL = 'stub-model';

/** The stub model: the first request gets a `team` tool call, every later one a final text. */
function startStub(toolArgs) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      const parsed = JSON.parse(body);
      requests.push(parsed);
      const chunk = (choices, extra = {}) => `data: ${JSON.stringify({ id: 'stub', object: 'chat.completion.chunk', created: 1, model: MODEL, choices, ...extra })}\n\n`;
      let out = '';
      if (requests.length === 1) {
        out += chunk([{ index: 0, delta: { role: 'assistant', tool_calls: [{ index: 0, id: 'call_team_1', type: 'function', function: { name: 'team', arguments: JSON.stringify(toolArgs) } }] } }]);
        out += chunk([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]);
      } else {
        out += chunk([{ index: 0, delta: { role: 'assistant', content: 'STUB-FINAL: the team is done.' } }]);
        out += chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]);
      }
      out += chunk([], { usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } });
      out += 'data: [DONE]\n\n';
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'close' });
      res.end(out);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port, requests, close: () => server.close() }));
  });
}

function runPi(args, env, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(PI, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const toolMessages = (req) => (req.messages ?? []).filter((m) => m.role === 'tool');
const textOf = (m) => (typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => p.text ?? '').join(''));

test('pi calls team run; crewd runs it; the report comes back to the model', { skip: !existsSync(PI) && `pi is not installed at ${PI} (run tests/pi/setup.sh, or set CREW_PI_DIR)` }, async () => {
  const d = await startDaemon();
  const stub = await startStub({ action: 'run', goal: 'Add a greeting to the README', team: 'default', runtime: 'fake' });
  try {
    const agentDir = path.join(d.home, '.pi', 'agent');
    mkdirSync(agentDir, { recursive: true });
    writeFileSync(path.join(agentDir, 'models.json'), JSON.stringify({
      providers: {
        stub: {
          baseUrl: `http://127.0.0.1:${stub.port}/v1`,
          api: 'openai-completions',
          apiKey: 'stub-key-not-secret',
          compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
          models: [{ id: MODEL, name: 'Stub model', contextWindow: 128000, maxTokens: 4096, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }],
        },
      },
    }));
    const env = { PATH: process.env.PATH, HOME: d.home, CREW_SOCKET: d.socket, NO_COLOR: '1' };
    const pi = await runPi(['--offline', '--no-session', '--mode', 'json', '-e', EXTENSION, '--model', `stub/${MODEL}`, '-p', 'Have the default crew team add a greeting to the README.'], env, d.work);
    assert.equal(pi.code, 0, `pi failed:\n${pi.stderr}\n${pi.stdout.slice(-4000)}`);

    assert.ok(stub.requests.length >= 2, `the stub saw ${stub.requests.length} request(s)`);
    const first = stub.requests[0];
    assert.ok((first.tools ?? []).some((t) => t.function?.name === 'team'), `pi offered the team tool: ${JSON.stringify(first.tools?.map((t) => t.function?.name))}`);
    const results = toolMessages(stub.requests[1]);
    assert.equal(results.length, 1, JSON.stringify(stub.requests[1].messages, null, 1));
    const report = textOf(results[0]);
    const m = /# Run (\S+)/.exec(report);
    assert.ok(m, `the tool result is the run's report: ${report}`);
    assert.match(report, /\*\*Status\*\*: completed/);
    assert.match(report, /\*\*Team \/ workflow\*\*: default \/ default on runtime `fake`/);
    assert.match(report, /fake-agent: done with "Goal: Add a greeting to the README"/);

    // The run is crewd's, and finished.
    const status = await new Promise((resolve, reject) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'team.status', params: { runId: m[1] } });
      const req = http.request({ socketPath: d.socket, path: '/', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        let data = '';
        res.on('data', (c) => { data += c; });
        res.on('end', () => resolve(JSON.parse(data).result));
      });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(status.run.status, 'completed');
    assert.equal(status.run.cwd, d.work);
    assert.equal(status.tasks.length, 4);
    // pi printed the stub's final answer, written after it read the report.
    assert.match(pi.stdout, /STUB-FINAL/);
  } finally {
    stub.close();
    await d.stop();
    d.cleanup();
  }
});

const TSC = path.join(REPO, 'tests', 'node', 'node_modules', 'typescript', 'bin', 'tsc');

test('the extension type-checks against pi\'s types and the generated API types', {
  skip: (!existsSync(PI) && `pi is not installed at ${PI}`) || (!existsSync(TSC) && `TypeScript is not installed (npm ci in tests/node)`),
}, () => {
  const r = spawnSync(process.execPath, [TSC, '-p', path.join(REPO, 'clients', 'pi', 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});
