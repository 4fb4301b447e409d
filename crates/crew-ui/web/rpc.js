// @ts-check
// crewd's JSON-RPC API over one WebSocket (`/rpc`, forwarded to the daemon's socket by the
// gateway). Reconnects by itself with backoff; each subscription remembers the last seq it
// delivered and is re-made with `afterSeq` on reconnect, and anything at or below that seq is
// dropped, so a daemon restart under an open page leaves no gap and no duplicate.

/** @typedef {import('../../../proto-docs/crew-api').Event} CrewEvent */

export class RpcError extends Error {
  /** @param {{code:number, message:string, data?:unknown}} e */
  constructor(e) {
    super(e.message);
    this.code = e.code;
    this.data = e.data;
  }
}

export class Rpc {
  // `rpc` next to the page: the gateway serves the dashboard under its own random path
  // prefix, the only path its cookie is sent to.
  constructor(url = new URL('rpc', location.href).href.replace(/^http/, 'ws')) {
    this.url = url;
    this.nextId = 1;
    /** @type {Map<number, {resolve:(v:any)=>void, reject:(e:any)=>void}>} */
    this.pending = new Map();
    /** @type {Map<number, Sub>} subscription id (the daemon's) → subscription */
    this.live = new Map();
    /** @type {Set<Sub>} */
    this.subs = new Set();
    /** @type {((up: boolean) => void)[]} */
    this.onState = [];
    this.up = false;
    this.backoff = 250;
    /** @type {WebSocket | null} */
    this.ws = null;
    /** @type {Promise<void>} */
    this.ready = new Promise((r) => (this._ready = r));
    this.open();
  }

  open() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 250;
      this.up = true;
      this.onState.forEach((f) => f(true));
      this._ready?.();
      for (const s of this.subs) s.start();
    };
    ws.onmessage = (m) => this.receive(String(m.data));
    ws.onclose = () => {
      if (this.ws !== ws) return;
      const wasUp = this.up;
      this.up = false;
      this.live.clear();
      for (const [, p] of this.pending) p.reject(new RpcError({ code: -1, message: 'connection to crewd lost' }));
      this.pending.clear();
      if (wasUp) this.onState.forEach((f) => f(false));
      this.ready = new Promise((r) => (this._ready = r));
      setTimeout(() => this.open(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 4000);
    };
  }

  /** @param {string} text */
  receive(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.method === 'team.event' && msg.params) {
      const sub = this.live.get(msg.params.subscription);
      sub?.deliver(msg.params.result);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) p.reject(new RpcError(msg.error));
    else p.resolve(msg.result);
  }

  /**
   * @param {string} method
   * @param {unknown} [params]
   * @returns {Promise<any>}
   */
  async call(method, params) {
    while (!this.up) await this.ready;
    const id = this.nextId++;
    const body = params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws?.send(JSON.stringify(body));
    });
  }

  /**
   * Events of one run (or of everything without runId), stored ones after `afterSeq` first.
   * @param {{runId?: string, afterSeq?: number}} params
   * @param {(e: CrewEvent) => void} onEvent
   */
  subscribe(params, onEvent) {
    const sub = new Sub(this, params, onEvent);
    this.subs.add(sub);
    if (this.up) sub.start();
    return sub;
  }
}

class Sub {
  /**
   * @param {Rpc} rpc
   * @param {{runId?: string, afterSeq?: number}} params
   * @param {(e: CrewEvent) => void} onEvent
   */
  constructor(rpc, params, onEvent) {
    this.rpc = rpc;
    this.runId = params.runId;
    this.lastSeq = params.afterSeq ?? 0;
    this.onEvent = onEvent;
    /** @type {number | null} */
    this.id = null;
    this.closed = false;
    /** Seqs delivered, in order (bounded): what the tests compare with the journal. @type {number[]} */
    this.seqs = [];
  }

  async start() {
    const params = { afterSeq: this.lastSeq, ...(this.runId ? { runId: this.runId } : {}) };
    try {
      const id = await this.rpc.call('team.subscribe', params);
      if (this.closed) {
        this.rpc.call('team.unsubscribe', [id]).catch(() => {});
        return;
      }
      this.id = id;
      this.rpc.live.set(id, this);
    } catch {
      // The connection dropped under us: `open` starts every subscription again.
    }
  }

  /** @param {any} item */
  deliver(item) {
    if (item && item.notice === 'dropped') {
      // Fell too far behind: the daemon ended this one; make it again from where we are.
      if (this.id !== null) this.rpc.live.delete(this.id);
      this.lastSeq = Math.max(this.lastSeq, item.lastSeq ?? 0);
      this.start();
      return;
    }
    if (!item || typeof item.seq !== 'number' || item.seq <= this.lastSeq) return;
    this.lastSeq = item.seq;
    if (this.seqs.length < 100_000) this.seqs.push(item.seq);
    this.onEvent(item);
  }

  close() {
    this.closed = true;
    this.rpc.subs.delete(this);
    if (this.id !== null) {
      this.rpc.live.delete(this.id);
      this.rpc.call('team.unsubscribe', [this.id]).catch(() => {});
    }
  }
}
