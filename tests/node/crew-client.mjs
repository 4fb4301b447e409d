// A crewd client the way an editor extension would write one: Node's standard library plus the
// `ws` package, nothing else. One-shot calls go over HTTP POST on the Unix socket; a WebSocket on
// the same socket carries calls and subscriptions. Types: proto-docs/crew-api.d.ts.

import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';

/**
 * Where the daemon listens (SPEC §2): `CREW_SOCKET`, else `$XDG_RUNTIME_DIR/crew/crewd.sock`,
 * else `/tmp/crew-$UID/crewd.sock`.
 * @param {NodeJS.ProcessEnv} [env]
 * @param {number} [uid]
 * @returns {string}
 */
export function discoverSocket(env = process.env, uid = os.userInfo().uid) {
  if (env.CREW_SOCKET) return env.CREW_SOCKET;
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, 'crew', 'crewd.sock');
  return path.join('/tmp', `crew-${uid}`, 'crewd.sock');
}

/** A JSON-RPC error answer (`code`, `message`, `data`), or a transport failure (`code` null). */
export class RpcError extends Error {
  /**
   * @param {string} message
   * @param {number | null} code
   * @param {unknown} [data]
   */
  constructor(message, code, data) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.data = data;
  }
}

/** Thrown when no daemon listens on the socket, with the hint an extension would show. */
export class DaemonNotRunning extends Error {
  /** @param {string} socketPath @param {Error} cause */
  constructor(socketPath, cause) {
    super(`crewd is not running (no answer on ${socketPath}: ${cause.message}); start it with \`crewd\` or \`systemctl --user start crewd.socket\``);
    this.name = 'DaemonNotRunning';
    this.socketPath = socketPath;
    this.cause = cause;
  }
}

function notRunning(socketPath, err) {
  return err && (err.code === 'ENOENT' || err.code === 'ECONNREFUSED')
    ? new DaemonNotRunning(socketPath, err)
    : err;
}

function answerOf(msg) {
  if (msg && typeof msg === 'object' && msg.error) {
    const e = msg.error;
    throw new RpcError(String(e.message ?? 'error'), typeof e.code === 'number' ? e.code : null, e.data);
  }
  if (!msg || typeof msg !== 'object' || !('result' in msg)) {
    throw new RpcError(`not a JSON-RPC answer: ${JSON.stringify(msg).slice(0, 200)}`, null);
  }
  return msg.result;
}

/**
 * One call over HTTP POST on the Unix socket.
 * @param {string} socketPath
 * @param {string} method
 * @param {object} [params]
 * @param {{timeoutMs?: number}} [opts]
 * @returns {Promise<any>}
 */
export function httpCall(socketPath, method, params = {}, opts = {}) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  const timeoutMs = opts.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const req = http.request({
      socketPath,
      path: '/',
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      },
      timeout: timeoutMs,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let msg;
        try {
          msg = JSON.parse(text);
        } catch {
          reject(new RpcError(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`, null));
          return;
        }
        try {
          resolve(answerOf(msg));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('timeout', () => req.destroy(new RpcError(`${method}: no answer within ${timeoutMs} ms`, null)));
    req.on('error', (e) => reject(notRunning(socketPath, e)));
    req.end(body);
  });
}

/**
 * Items of one subscription, in order, as an async iterator; `close()` unsubscribes.
 * Items that arrive before anyone asks are queued.
 */
export class Subscription {
  /** @param {CrewClient} client @param {number|string} id @param {string} unsubscribeMethod */
  constructor(client, id, unsubscribeMethod) {
    this.client = client;
    this.id = id;
    this.unsubscribeMethod = unsubscribeMethod;
    /** @type {unknown[]} */
    this.queue = [];
    /** @type {{resolve: Function, reject: Function}[]} */
    this.waiters = [];
    this.ended = false;
    /** @type {Error | null} */
    this.error = null;
  }

  /** @param {unknown} item */
  push(item) {
    if (this.ended) return;
    const w = this.waiters.shift();
    if (w) w.resolve({ value: item, done: false });
    else this.queue.push(item);
  }

  /** @param {Error | null} err */
  end(err) {
    if (this.ended) return;
    this.ended = true;
    this.error = err;
    for (const w of this.waiters.splice(0)) {
      if (err) w.reject(err);
      else w.resolve({ value: undefined, done: true });
    }
  }

  /** @returns {Promise<IteratorResult<any>>} */
  next() {
    if (this.queue.length > 0) return Promise.resolve({ value: this.queue.shift(), done: false });
    if (this.ended) {
      return this.error ? Promise.reject(this.error) : Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Unsubscribe (if the connection is still open) and end the iterator. */
  async close() {
    if (this.ended) return;
    this.client.subscriptions.delete(String(this.id));
    this.end(null);
    if (this.client.isOpen()) {
      await this.client.call(this.unsubscribeMethod, [this.id]).catch(() => false);
    }
  }

  async return() {
    await this.close();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** A WebSocket connection to crewd: concurrent calls correlated by id, and subscriptions. */
export class CrewClient {
  /** @param {WebSocket} ws @param {string} socketPath */
  constructor(ws, socketPath) {
    this.ws = ws;
    this.socketPath = socketPath;
    this.nextId = 1;
    /** @type {Map<number, {method: string, resolve: Function, reject: Function, timer: NodeJS.Timeout}>} */
    this.pending = new Map();
    /** @type {Map<string, Subscription>} */
    this.subscriptions = new Map();
    /**
     * Notifications that arrived before the answer naming their subscription was handled (ws
     * may deliver both in one tick); kept only while a subscribe call is in flight.
     * @type {Map<string, unknown[]>}
     */
    this.early = new Map();
    this.subscribing = 0;
    /** @type {Error | null} */
    this.closedWith = null;
    this.closing = false;
    ws.on('message', (data) => this.onMessage(data));
    ws.on('close', (code, reason) => this.onClose(new RpcError(`connection closed (${code}${reason.length ? ` ${reason}` : ''})`, null)));
    ws.on('error', (e) => this.onClose(e));
  }

  /**
   * Open a WebSocket on the daemon's Unix socket (`ws+unix:` URL).
   * @param {string} [socketPath]
   * @returns {Promise<CrewClient>}
   */
  static connect(socketPath = discoverSocket()) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws+unix:${socketPath}:/`, { perMessageDeflate: false });
      const fail = (e) => reject(notRunning(socketPath, e));
      ws.once('error', fail);
      ws.once('open', () => {
        ws.off('error', fail);
        resolve(new CrewClient(ws, socketPath));
      });
    });
  }

  isOpen() {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * @param {string} method
   * @param {object | unknown[]} [params]
   * @param {{timeoutMs?: number}} [opts]
   * @returns {Promise<any>}
   */
  call(method, params = {}, opts = {}) {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = this.nextId++;
    const timeoutMs = opts.timeoutMs ?? 120_000;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcError(`${method}: no answer within ${timeoutMs} ms`, null));
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }), (err) => {
        if (err) this.settle(id, err, undefined);
      });
    });
  }

  /**
   * Subscribe (e.g. `team.subscribe` → notifications `team.event`).
   * @param {string} method
   * @param {object} params
   * @param {{unsubscribe?: string}} [names] the unsubscribe method, if not `<family>.unsubscribe`
   * @returns {Promise<Subscription>}
   */
  async subscribe(method, params, names = {}) {
    const unsubscribe = names.unsubscribe ?? method.replace(/\.subscribe$/, '.unsubscribe');
    this.subscribing++;
    let id;
    try {
      id = await this.call(method, params);
    } finally {
      this.subscribing--;
    }
    const sub = new Subscription(this, id, unsubscribe);
    this.subscriptions.set(String(id), sub);
    for (const item of this.early.get(String(id)) ?? []) sub.push(item);
    this.early.delete(String(id));
    if (this.subscribing === 0) this.early.clear();
    if (this.closedWith) sub.end(this.closedWith);
    return sub;
  }

  /** Close the connection; pending calls fail and subscriptions end. */
  close() {
    this.closing = true;
    return new Promise((resolve) => {
      if (this.ws.readyState === WebSocket.CLOSED) {
        resolve();
        return;
      }
      this.ws.once('close', () => resolve());
      this.ws.close();
    });
  }

  settle(id, err, result) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (err) p.reject(err);
    else p.resolve(result);
  }

  onMessage(data) {
    let msg;
    try {
      msg = JSON.parse(data.toString());
    } catch {
      return;
    }
    // A batch answer is an array; we never send batches, but tolerate one.
    for (const m of Array.isArray(msg) ? msg : [msg]) {
      if (m && typeof m === 'object' && 'id' in m && m.id !== null && !('method' in m)) {
        try {
          this.settle(m.id, null, answerOf(m));
        } catch (e) {
          this.settle(m.id, e, undefined);
        }
      } else if (m && typeof m === 'object' && typeof m.method === 'string' && m.params && 'subscription' in m.params) {
        const key = String(m.params.subscription);
        const item = m.params.result;
        const sub = this.subscriptions.get(key);
        if (sub) {
          sub.push(item);
          // crewd closes a subscriber it dropped right after this notice.
          if (item && typeof item === 'object' && typeof item.notice === 'string') {
            this.subscriptions.delete(key);
            sub.end(null);
          }
        } else if (this.subscribing > 0) {
          const q = this.early.get(key) ?? [];
          q.push(item);
          this.early.set(key, q);
        }
        // Otherwise it belongs to a subscription already closed: late, and dropped.
      }
    }
  }

  onClose(err) {
    if (this.closedWith) return;
    this.closedWith = err;
    for (const id of [...this.pending.keys()]) this.settle(id, err, undefined);
    // A connection we did not close ends its subscriptions with an error, so a consumer can
    // tell "the daemon went away" from "the subscription finished".
    for (const sub of this.subscriptions.values()) sub.end(this.closing ? null : err);
    this.subscriptions.clear();
  }
}
