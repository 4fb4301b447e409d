// The real crewd for the Node tests: a temporary socket, state dir and HOME, ready when the
// daemon says so on stderr (no polling).

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');

/** `CREWD_BIN`, else the workspace's debug build. */
export function crewdBin() {
  const bin = process.env.CREWD_BIN
    ? path.resolve(process.env.CREWD_BIN)
    : path.resolve(HERE, '..', '..', 'target', 'debug', 'crewd');
  if (!existsSync(bin)) {
    throw new Error(`crewd not found at ${bin}: build it with \`cargo build --workspace --bins\` or set CREWD_BIN`);
  }
  return bin;
}

const READY = 'crewd is ready';
// Variables of the developer's own setup that would point the daemon elsewhere.
const SCRUB = ['XDG_RUNTIME_DIR', 'XDG_STATE_HOME', 'XDG_CONFIG_HOME', 'CREW_SOCKET', 'CREW_STATE_DIR',
  'CREW_CONFIG', 'NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES', 'JOURNAL_STREAM', 'INVOCATION_ID'];

/**
 * Start crewd; resolves once it serves.
 * @param {{env?: Record<string, string>, readyTimeoutMs?: number, root?: string}} [opts]
 */
export async function startDaemon(opts = {}) {
  const bin = crewdBin();
  const root = opts.root ?? mkdtempSync(path.join(tmpdir(), 'crew-node-'));
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  mkdirSync(path.join(home, '.config'), { recursive: true });
  mkdirSync(work, { recursive: true });
  const socket = path.join(root, 'run', 'crewd.sock');
  const stateDir = path.join(root, 'state');
  const env = { ...process.env };
  for (const k of SCRUB) delete env[k];
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    CREW_LOG: 'info,jsonrpsee=warn,sled=warn',
    NO_COLOR: '1',
  }, opts.env ?? {});
  const child = spawn(bin, ['--socket', socket, '--state-dir', stateDir], {
    env,
    cwd: work,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`crewd did not become ready:\n${log}`)), opts.readyTimeoutMs ?? 60_000);
    const onData = (chunk) => {
      log += chunk.toString();
      if (log.includes(READY)) {
        clearTimeout(timer);
        resolve(undefined);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`crewd exited early (${code ?? signal}):\n${log}`));
    });
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
  return {
    root,
    home,
    work,
    socket,
    stateDir,
    child,
    pid: child.pid,
    log: () => log,
    exited,
    /** SIGTERM and wait; resolves to the exit status. */
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    cleanup() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(root, { recursive: true, force: true });
    },
  };
}
