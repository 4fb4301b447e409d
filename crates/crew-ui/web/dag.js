// @ts-check
// A run's tasks as a DAG: laid out by `layout.js` (layered, Sugiyama-style: ranks from the
// dependencies, crossings reduced), drawn as SVG. Colours come from the `data-status`
// attribute and the stylesheet, so a status change is one attribute write.

/** @typedef {import('../../../proto-docs/crew-api').TaskView} TaskView */

import { layout } from './layout.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 168;
const H = 60;

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
function el(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/**
 * Draws `tasks` into `host` and returns a handle to recolour nodes live.
 * @param {HTMLElement} host
 * @param {TaskView[]} tasks
 * @param {(taskId: string) => void} onSelect
 * @param {(t: TaskView) => string} [usage] a task's tokens and cost, shown on its node
 */
export function drawDag(host, tasks, onSelect, usage = () => '') {
  host.replaceChildren();
  /** @type {Map<string, Element>} */
  const nodes = new Map();
  const g = layout(
    tasks.map((t) => ({ id: t.id, width: W, height: H })),
    tasks.flatMap((t) => t.dependsOn.map((d) => ({ from: d, to: t.id }))),
  );
  const svg = el('svg', {
    viewBox: `0 0 ${Math.max(g.width, W) + 20} ${Math.max(g.height, H) + 20}`,
    width: Math.max(g.width, W) + 20,
    height: Math.max(g.height, H) + 20,
    role: 'group',
    'aria-label': 'task graph',
  });
  const root = el('g', { transform: 'translate(10,10)' });
  svg.append(root);
  const defs = el('defs', {});
  const marker = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }));
  defs.append(marker);
  svg.prepend(defs);
  for (const e of g.edges) {
    const d = e.points.map((p, i) => `${i ? 'L' : 'M'} ${p.x} ${p.y}`).join(' ');
    root.append(el('path', { d, class: 'edge', 'marker-end': 'url(#arrow)', 'data-from': e.from, 'data-to': e.to }));
  }
  const byId = new Map(tasks.map((t) => [t.id, t]));
  for (const n of g.nodes) {
    const t = byId.get(n.id);
    if (!t) continue;
    const cand = t.candidates;
    const node = el('g', {
      // A step's candidates are drawn as a group (dashed), its selector with the choice.
      class: cand?.of ? 'node candidate' : 'node',
      transform: `translate(${n.x - W / 2},${n.y - H / 2})`,
      tabindex: 0,
      role: 'button',
      'data-task': t.id,
      'data-status': t.status,
      'data-role': t.role,
      'aria-label': `${t.id}, ${t.role}, ${t.status}`,
    });
    node.append(el('rect', { width: W, height: H, rx: 6 }));
    const title = el('text', { x: 8, y: 18, class: 'node-id' });
    title.textContent = t.id.length > 22 ? `${t.id.slice(0, 21)}…` : t.id;
    const sub = el('text', { x: 8, y: 36, class: 'node-sub' });
    sub.textContent = subLine(t.role, t.status, t.verdict?.verdict);
    if (t.verdict) node.setAttribute('data-verdict', t.verdict.verdict);
    if (cand?.of) node.setAttribute('data-candidate-of', cand.of);
    const used = el('text', { x: 8, y: 52, class: 'node-usage' });
    used.textContent = candidateLine(t) ?? usage(t);
    node.append(title, sub, used);
    node.addEventListener('click', () => onSelect(t.id));
    node.addEventListener('keydown', (ev) => {
      const k = /** @type {KeyboardEvent} */ (ev).key;
      if (k === 'Enter' || k === ' ') {
        ev.preventDefault();
        onSelect(t.id);
      }
    });
    root.append(node);
    nodes.set(t.id, node);
  }
  host.append(svg);
  return handle(nodes);
}

/**
 * A candidate's or a selector's third line (issue 36): which candidate it is and whether it
 * passed, or what was chosen and by whom; `undefined` for any other task.
 * @param {TaskView} t
 * @returns {string | undefined}
 */
export function candidateLine(t) {
  const c = t.candidates;
  if (!c) return undefined;
  if (c.of) {
    const out = c.failedChecks?.length ? ' · out' : t.status === 'completed' ? ' · passed' : '';
    return `cand ${c.index ?? '?'}${c.runtime ? ` · ${c.runtime}` : ''}${out}`;
  }
  if (c.choice) return `chose ${c.choice.index} (${c.choice.by})`;
  return `${c.members?.length ?? 0} candidates · ${c.select ?? ''}`;
}

/**
 * A node's second line: its role and status, and a judge's last verdict (issue 30).
 * @param {string} role
 * @param {string} status
 * @param {string | undefined} verdict
 */
function subLine(role, status, verdict) {
  // A completed judge's verdict says more than "completed"; the line stays inside its node.
  const end = status === 'completed' && verdict ? VERDICT_WORDS[verdict] ?? verdict : status;
  const line = `${role} · ${end}`;
  return line.length > SUB_MAX ? `${line.slice(0, SUB_MAX - 1)}…` : line;
}

/** What fits a node's second line. */
const SUB_MAX = 27;
/** @type {Record<string, string>} */
const VERDICT_WORDS = { pass: '✓ pass', fail: '✗ fail', changes_requested: '✗ changes' };

/** @param {Map<string, Element>} nodes */
function handle(nodes) {
  return {
    /**
     * @param {string} taskId
     * @param {string} status
     * @param {string} [verdict] a judge's last verdict, when its status was read whole
     */
    setStatus(taskId, status, verdict) {
      const n = nodes.get(taskId);
      if (!n) return;
      n.setAttribute('data-status', status);
      if (verdict) n.setAttribute('data-verdict', verdict);
      else if (status !== 'completed') n.removeAttribute('data-verdict');
      const sub = n.querySelector('.node-sub');
      if (sub) sub.textContent = subLine(n.getAttribute('data-role') ?? '', status, n.getAttribute('data-verdict') ?? undefined);
      const label = n.getAttribute('aria-label');
      if (label) n.setAttribute('aria-label', label.replace(/[^,]+$/, ` ${status}`));
    },
    /**
     * @param {string} taskId
     * @param {string} text
     */
    setUsage(taskId, text) {
      const u = nodes.get(taskId)?.querySelector('.node-usage');
      if (u && u.textContent !== text) u.textContent = text;
    },
    /** @param {string} taskId */
    select(taskId) {
      for (const [id, n] of nodes) n.classList.toggle('selected', id === taskId);
    },
  };
}
