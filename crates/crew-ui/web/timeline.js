// @ts-check
// A run's attempts over time: one lane per task, a bar per attempt from its start to its end,
// coloured by how it ended (completed, failed and retried, a failing verdict, waiting,
// needing attention, cancelled), a running attempt growing to now. Built from the run's events (`team.events` for
// the history, the page's subscription after it), the same data `crewctl logs` reads.

/** @typedef {import('../../../proto-docs/crew-api').Event} CrewEvent */

const SVG = 'http://www.w3.org/2000/svg';
const LANE = 20;
const LABEL = 150;
const WIDTH = 760;

/** How an event ends the task's open attempt, if it does. */
const ENDS = /** @type {Record<string, string>} */ ({
  'task.completed': 'completed',
  'task.failed': 'failed',
  'task.retrying': 'failed',
  'task.needs_attention': 'needs_attention',
  'task.waiting': 'waiting',
  'task.cancelled': 'cancelled',
});

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
function el(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/** @param {number} ms */
function span(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

/**
 * @param {HTMLElement} host
 * @param {string[]} order task ids in the run's order (lanes), more join as they start
 */
export function timeline(host, order) {
  /** @type {Map<string, {attempt: number, start: number, end: number | null, outcome: string}[]>} */
  const lanes = new Map(order.map((id) => [id, []]));
  /** @type {ReturnType<typeof setInterval> | null} */
  let ticking = null;

  /** @param {CrewEvent} e */
  function add(e) {
    const id = e.taskId;
    if (e.type === 'run.cancelled') {
      // Cancelling a run ends its running attempts in the one event.
      const at = Date.parse(e.time);
      for (const bars of lanes.values()) {
        const open = bars[bars.length - 1];
        if (open && open.end === null) Object.assign(open, { end: at, outcome: 'cancelled' });
      }
      return;
    }
    if (!id) return;
    const at = Date.parse(e.time);
    if (!lanes.has(id)) lanes.set(id, []);
    const bars = lanes.get(id) ?? [];
    const open = bars.length ? bars[bars.length - 1] : null;
    if (e.type === 'task.started') {
      if (open && open.end === null) open.end = at;
      const attempt = Number(/** @type {any} */ (e.data)?.attempt ?? bars.length + 1);
      bars.push({ attempt, start: at, end: null, outcome: 'running' });
      return;
    }
    // A judge's failing verdict ends its attempt as completed, yet the round failed: it gets
    // a colour of its own, so fix rounds read on the lane (verdict fail, fix task, pass).
    const verdict = /** @type {any} */ (e.data)?.verdict?.verdict;
    const outcome = e.type === 'task.completed' && verdict && verdict !== 'pass' ? 'verdict_fail' : ENDS[e.type];
    if (outcome && open && open.end === null) {
      open.end = at;
      open.outcome = outcome;
    }
  }

  function draw() {
    const now = Date.now();
    const all = [...lanes.values()].flat();
    const ids = [...lanes.keys()];
    if (all.length === 0) {
      host.replaceChildren(Object.assign(document.createElement('p'), { className: 'hint', textContent: 'No attempt has started yet.' }));
      return;
    }
    const t0 = Math.min(...all.map((b) => b.start));
    const t1 = Math.max(t0 + 1000, ...all.map((b) => b.end ?? now));
    const x = (/** @type {number} */ t) => LABEL + ((t - t0) / (t1 - t0)) * (WIDTH - LABEL - 10);
    const svg = el('svg', { width: WIDTH, height: ids.length * LANE + 22, viewBox: `0 0 ${WIDTH} ${ids.length * LANE + 22}`, role: 'img', 'aria-label': `timeline of ${all.length} attempts over ${span(t1 - t0)}` });
    ids.forEach((id, i) => {
      const y = i * LANE;
      const label = el('text', { x: 0, y: y + 14, class: 'lane-label' });
      label.textContent = id.length > 20 ? `${id.slice(0, 19)}…` : id;
      svg.append(label);
      for (const b of lanes.get(id) ?? []) {
        const end = b.end ?? now;
        const rect = el('rect', {
          x: x(b.start), y: y + 3, width: Math.max(2, x(end) - x(b.start)), height: LANE - 6, rx: 3,
          class: 'bar', 'data-task': id, 'data-attempt': b.attempt, 'data-status': b.outcome,
        });
        const title = el('title', {});
        title.textContent = `${id}, attempt ${b.attempt}: ${b.outcome.replace('_', ' ')}, ${span(end - b.start)}`;
        rect.append(title);
        svg.append(rect);
      }
    });
    const axis = el('text', { x: WIDTH - 10, y: ids.length * LANE + 16, class: 'axis', 'text-anchor': 'end' });
    axis.textContent = span(t1 - t0);
    svg.append(axis);
    host.replaceChildren(svg);
    // A running attempt grows with the clock, not only with events.
    const running = all.some((b) => b.end === null);
    if (running && !ticking) ticking = setInterval(draw, 1000);
    if (!running && ticking) {
      clearInterval(ticking);
      ticking = null;
    }
  }

  return {
    add,
    draw,
    stop() {
      if (ticking) clearInterval(ticking);
      ticking = null;
    },
  };
}
