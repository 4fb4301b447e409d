// @ts-check
// A layered (Sugiyama-style) layout of a run's DAG, left to right, written for crew: ranks by
// longest path from the roots, a dummy node per rank an edge skips (so long edges bend around
// nodes instead of through them), crossings reduced by barycenter sweeps (the order with the
// fewest crossings seen is kept), then each layer's positions pulled towards its neighbours'
// while keeping the order and the spacing. Plain arrays and maps, no recursion: a run of a few
// hundred tasks lays out in milliseconds.

const NODE_SEP = 18;
const RANK_SEP = 56;
const SWEEPS = 8;
const PULLS = 6;

/**
 * @typedef {{id: string, width: number, height: number}} LayoutNode
 * @typedef {{from: string, to: string}} LayoutEdge
 * @typedef {{id: string, rank: number, width: number, height: number, dummy: boolean, order: number, y: number}} Cell
 */

/**
 * Ranks by longest path: a node sits one rank right of its latest dependency. Kahn's order, so a
 * cycle (never sent by crewd: plans are checked) leaves its nodes at rank 0 instead of looping.
 * @param {string[]} ids
 * @param {Map<string, string[]>} preds
 * @param {Map<string, string[]>} succs
 */
function ranks(ids, preds, succs) {
  /** @type {Map<string, number>} */
  const rank = new Map(ids.map((id) => [id, 0]));
  const indeg = new Map(ids.map((id) => [id, preds.get(id)?.length ?? 0]));
  const queue = ids.filter((id) => indeg.get(id) === 0);
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    for (const w of succs.get(v) ?? []) {
      rank.set(w, Math.max(rank.get(w) ?? 0, (rank.get(v) ?? 0) + 1));
      const d = (indeg.get(w) ?? 1) - 1;
      indeg.set(w, d);
      if (d === 0) queue.push(w);
    }
  }
  return rank;
}

/**
 * Crossings between two adjacent layers, given the edges between them as (upper, lower) order
 * pairs: pairs sorted by upper order, then inversions of the lower orders.
 * @param {[number, number][]} pairs
 */
function crossings(pairs) {
  const sorted = [...pairs].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let n = 0;
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      if (sorted[j][0] !== sorted[i][0] && sorted[j][1] < sorted[i][1]) n++;
    }
  }
  return n;
}

/**
 * @param {LayoutNode[]} nodes
 * @param {LayoutEdge[]} edges
 * @returns {{width: number, height: number, nodes: {id: string, x: number, y: number}[], edges: {from: string, to: string, points: {x: number, y: number}[]}[]}}
 */
export function layout(nodes, edges) {
  const ids = nodes.map((n) => n.id);
  const known = new Set(ids);
  const real = edges.filter((e) => known.has(e.from) && known.has(e.to) && e.from !== e.to);
  /** @type {Map<string, string[]>} */
  const preds = new Map(ids.map((id) => [id, []]));
  /** @type {Map<string, string[]>} */
  const succs = new Map(ids.map((id) => [id, []]));
  for (const e of real) {
    preds.get(e.to)?.push(e.from);
    succs.get(e.from)?.push(e.to);
  }
  const rank = ranks(ids, preds, succs);

  // Cells: the nodes, and a dummy per rank a long edge passes through.
  /** @type {Map<string, Cell>} */
  const cells = new Map();
  for (const n of nodes) cells.set(n.id, { id: n.id, rank: rank.get(n.id) ?? 0, width: n.width, height: n.height, dummy: false, order: 0, y: 0 });
  /** @type {Map<string, string[]>} cell → cells one rank right */
  const down = new Map([...cells.keys()].map((id) => [id, []]));
  /** @type {Map<string, string[]>} cell → cells one rank left */
  const up = new Map([...cells.keys()].map((id) => [id, []]));
  /** @type {{from: string, to: string, chain: string[]}[]} */
  const routed = [];
  const height = Math.max(1, ...nodes.map((n) => n.height));
  for (const [k, e] of real.entries()) {
    const r0 = rank.get(e.from) ?? 0;
    const r1 = rank.get(e.to) ?? 0;
    const chain = [e.from];
    for (let r = r0 + 1; r < r1; r++) {
      const id = `\u0000${k}:${r}`;
      cells.set(id, { id, rank: r, width: 0, height: 0, dummy: true, order: 0, y: 0 });
      down.set(id, []);
      up.set(id, []);
      chain.push(id);
    }
    chain.push(e.to);
    for (let i = 0; i + 1 < chain.length; i++) {
      down.get(chain[i])?.push(chain[i + 1]);
      up.get(chain[i + 1])?.push(chain[i]);
    }
    routed.push({ from: e.from, to: e.to, chain });
  }

  /** @type {Cell[][]} */
  const layers = [];
  for (const c of cells.values()) (layers[c.rank] ??= []).push(c);
  for (let r = 0; r < layers.length; r++) layers[r] ??= [];
  const setOrder = () => layers.forEach((l) => l.forEach((c, i) => { c.order = i; }));
  setOrder();

  const layerCrossings = () => {
    let n = 0;
    for (let r = 0; r + 1 < layers.length; r++) {
      /** @type {[number, number][]} */
      const pairs = [];
      for (const c of layers[r]) for (const w of down.get(c.id) ?? []) pairs.push([c.order, cells.get(w)?.order ?? 0]);
      n += crossings(pairs);
    }
    return n;
  };
  /** @param {Cell} c @param {Map<string, string[]>} side */
  const barycenter = (c, side) => {
    const ns = side.get(c.id) ?? [];
    if (ns.length === 0) return c.order;
    return ns.reduce((s, id) => s + (cells.get(id)?.order ?? 0), 0) / ns.length;
  };
  let best = layers.map((l) => [...l]);
  let bestCrossings = layerCrossings();
  for (let sweep = 0; sweep < SWEEPS && bestCrossings > 0; sweep++) {
    const downward = sweep % 2 === 0;
    const order = downward ? layers.map((_, i) => i).slice(1) : layers.map((_, i) => i).reverse().slice(1);
    for (const r of order) {
      const side = downward ? up : down;
      const keyed = layers[r].map((c) => ({ c, k: barycenter(c, side) }));
      // Stable: ties keep their present order.
      keyed.sort((a, b) => a.k - b.k || a.c.order - b.c.order);
      layers[r] = keyed.map((x) => x.c);
      layers[r].forEach((c, i) => { c.order = i; });
    }
    const n = layerCrossings();
    if (n < bestCrossings) {
      bestCrossings = n;
      best = layers.map((l) => [...l]);
    }
  }
  for (let r = 0; r < layers.length; r++) layers[r] = best[r];
  setOrder();

  // Vertical positions: stacked in order, then pulled towards the mean of the neighbours'
  // (alternately left and right), never closer than the spacing to the cell above.
  const gap = (/** @type {Cell} */ c) => (c.dummy ? NODE_SEP / 2 : c.height + NODE_SEP);
  for (const l of layers) {
    let y = 0;
    for (const c of l) {
      c.y = y + (c.dummy ? 0 : c.height / 2);
      y += gap(c);
    }
  }
  for (let pass = 0; pass < PULLS; pass++) {
    const side = pass % 2 === 0 ? up : down;
    for (const l of layers) {
      const want = l.map((c) => {
        const ns = side.get(c.id) ?? [];
        return ns.length ? ns.reduce((s, id) => s + (cells.get(id)?.y ?? 0), 0) / ns.length : c.y;
      });
      for (let i = 0; i < l.length; i++) {
        const min = i === 0 ? -Infinity : l[i - 1].y + half(l[i - 1]) + (l[i - 1].dummy || l[i].dummy ? NODE_SEP / 2 : NODE_SEP) + half(l[i]);
        l[i].y = Math.max(min, want[i]);
      }
    }
  }
  let top = Infinity;
  let bottom = -Infinity;
  for (const c of cells.values()) {
    top = Math.min(top, c.y - half(c));
    bottom = Math.max(bottom, c.y + half(c));
  }
  if (!Number.isFinite(top)) {
    top = 0;
    bottom = 0;
  }

  // Horizontal positions: one column per rank, as wide as its widest node.
  const colWidth = layers.map((l) => Math.max(0, ...l.map((c) => c.width)));
  const colX = [];
  let x = 0;
  for (const w of colWidth) {
    colX.push(x + w / 2);
    x += w + RANK_SEP;
  }
  const pos = (/** @type {string} */ id) => {
    const c = cells.get(id);
    return c ? { x: colX[c.rank] ?? 0, y: c.y - top, w: c.width } : { x: 0, y: 0, w: 0 };
  };
  return {
    width: Math.max(0, x - RANK_SEP),
    height: Math.max(height, bottom - top),
    nodes: ids.map((id) => ({ id, x: pos(id).x, y: pos(id).y })),
    edges: routed.map((e) => ({
      from: e.from,
      to: e.to,
      points: e.chain.map((id, i) => {
        const p = pos(id);
        // From the right side of the dependency to the left side of the dependent.
        const dx = i === 0 ? p.w / 2 : i === e.chain.length - 1 ? -p.w / 2 : 0;
        return { x: p.x + dx, y: p.y };
      }),
    })),
  };
}

/** @param {Cell} c */
function half(c) {
  return c.dummy ? 0 : c.height / 2;
}
