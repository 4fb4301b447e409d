// Progress of a run rendered from its events (SPEC §6), one line per change, the way an editor
// extension fills an output channel or a status item.

/** Run event types after which nothing more happens to the run unless someone acts. */
export const RUN_STOPPED = new Set(['run.completed', 'run.failed', 'run.cancelled', 'run.blocked']);

/** Run event types that end a run for good. */
export const RUN_FINISHED = new Set(['run.completed', 'run.failed', 'run.cancelled']);

/** @param {any} usage */
function tokens(usage) {
  if (!usage || typeof usage !== 'object') return 0;
  return (Number(usage.input) || 0) + (Number(usage.output) || 0);
}

/** @param {number} ms */
export function formatDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '?';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.round(s - m * 60)).padStart(2, '0')}s`;
}

/** @param {number} n */
function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** Turns events into lines; keeps just enough state (per-task start time, status). */
export class ProgressView {
  constructor() {
    /** @type {Map<string, {status: string, startedAt: number | null, role: string | null}>} */
    this.tasks = new Map();
    /** @type {string | null} */
    this.runStatus = null;
    this.lastSeq = 0;
  }

  task(id) {
    let t = this.tasks.get(id);
    if (!t) {
      t = { status: 'queued', startedAt: null, role: null };
      this.tasks.set(id, t);
    }
    return t;
  }

  /** True once the run reached a state it does not leave by itself. */
  get stopped() {
    return this.runStatus !== null && RUN_STOPPED.has(`run.${this.runStatus}`);
  }

  /**
   * The line for one event, or null when it changes nothing worth showing.
   * @param {any} ev a `team.event` item (an Event or a SubscriptionNotice)
   * @returns {string | null}
   */
  apply(ev) {
    if (ev && typeof ev.notice === 'string') {
      return `! subscription ${ev.notice}: ${ev.message} (resume after seq ${ev.lastSeq})`;
    }
    if (!ev || typeof ev.type !== 'string') return null;
    if (typeof ev.seq === 'number') {
      // A resubscription may replay what we already showed.
      if (ev.seq <= this.lastSeq) return null;
      this.lastSeq = ev.seq;
    }
    const data = ev.data && typeof ev.data === 'object' ? ev.data : {};
    const at = Date.parse(ev.time);
    const id = ev.taskId ?? '';
    switch (ev.type) {
      case 'run.created': {
        const list = Array.isArray(data.tasks) ? data.tasks : [];
        for (const t of list) this.task(t.id).role = t.role ?? null;
        this.runStatus = 'queued';
        return `run ${ev.runId}: ${JSON.stringify(data.goal ?? '')} (${plural(list.length, 'task')}, runtime ${data.runtime ?? 'default'})`;
      }
      case 'run.started':
        this.runStatus = 'running';
        return null;
      case 'task.started': {
        const t = this.task(id);
        t.status = 'running';
        t.startedAt = at;
        const attempt = Number(data.attempt) > 1 ? `, attempt ${data.attempt}` : '';
        return `  ▶ ${id}${t.role ? ` (${t.role})` : ''} started${attempt}`;
      }
      case 'task.progress': {
        const u = data.usage ?? {};
        const tool = data.currentTool ? `, tool ${data.currentTool}` : '';
        return `  … ${id}: ${plural(Number(u.turns) || 0, 'turn')}, ${tokens(u)} tokens${tool}`;
      }
      case 'task.completed': {
        const t = this.task(id);
        t.status = 'completed';
        const took = t.startedAt === null ? '' : ` in ${formatDuration(at - t.startedAt)}`;
        return `  ✓ ${id} completed${took}, ${tokens(data.usage)} tokens`;
      }
      case 'task.failed':
        this.task(id).status = 'failed';
        return `  ✗ ${id} failed: ${ev.message ?? data.error ?? 'error'}`;
      case 'task.retrying':
        this.task(id).status = 'queued';
        return `  ↻ ${id} will be retried${ev.message ? `: ${ev.message}` : ''}`;
      case 'task.cancelled':
      case 'task.skipped':
      case 'task.waiting':
      case 'task.needs_attention': {
        const status = ev.type.slice('task.'.length);
        this.task(id).status = status;
        return `  - ${id} ${status.replace('_', ' ')}${ev.message ? `: ${ev.message}` : ''}`;
      }
      case 'run.completed':
      case 'run.failed':
      case 'run.cancelled':
      case 'run.blocked': {
        this.runStatus = ev.type.slice('run.'.length);
        if (ev.type === 'run.cancelled' && Array.isArray(data.cancelledTaskIds)) {
          for (const t of data.cancelledTaskIds) this.task(t).status = 'cancelled';
        }
        const done = [...this.tasks.values()].filter((t) => t.status === 'completed').length;
        const why = ev.message ?? data.reason ?? data.error;
        const usage = data.usage ? `, ${tokens(data.usage)} tokens` : '';
        return `run ${this.runStatus}: ${done}/${this.tasks.size} tasks completed${usage}${why ? ` (${why})` : ''}`;
      }
      case 'worker.spawned':
        return null;
      default:
        return `  · ${ev.type}${id ? ` ${id}` : ''}${ev.message ? `: ${ev.message}` : ''}`;
    }
  }
}
