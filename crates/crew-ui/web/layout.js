// @ts-check
// The one place that knows the layout library. `dagre.esm.js` is served only when crew was
// built with `web/node_modules` installed (`make ui-deps`); a failed import leaves the page
// working, with a task list instead of a drawing.

/** @type {any} */
let dagre = null;
try {
  // @ts-ignore: served next to this file only when built with the library (see build.rs).
  dagre = (await import('./dagre.esm.js')).default;
} catch {
  dagre = null;
}

export const layoutAvailable = dagre !== null;

/**
 * @param {{id: string, width: number, height: number}[]} nodes
 * @param {{from: string, to: string}[]} edges
 * @returns {{width: number, height: number, nodes: {id: string, x: number, y: number}[], edges: {from: string, to: string, points: {x: number, y: number}[]}[]}}
 */
export function layout(nodes, edges) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 18, ranksep: 56, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(nodes.map((n) => n.id));
  for (const n of nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const e of edges) if (ids.has(e.from) && ids.has(e.to)) g.setEdge(e.from, e.to);
  dagre.layout(g);
  const graph = g.graph();
  return {
    width: graph.width ?? 0,
    height: graph.height ?? 0,
    nodes: g.nodes().map((/** @type {string} */ id) => ({ id, x: g.node(id).x, y: g.node(id).y })),
    edges: g.edges().map((/** @type {{v: string, w: string}} */ e) => ({ from: e.v, to: e.w, points: g.edge(e).points ?? [] })),
  };
}
