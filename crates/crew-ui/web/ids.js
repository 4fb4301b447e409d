// @ts-check
// Short run ids, as crewctl shows them (crates/crewctl/src/render/ids.rs): a run id is
// `team_<YYYYMMDDHHMMSS>_<16 hex>`, people type a prefix of the hex part, and a list shows that
// part as long as it must be to tell the listed runs apart: at least 8 characters, one more
// than the longest prefix it shares with another listed id (runs created in the same second
// share the first hex digits). Ids of another shape are shown whole.

export const MIN_SHORT = 8;

/** @param {string} id */
export function randomPart(id) {
  const m = /^team_\d{14}_([0-9a-fA-F]+)$/.exec(id);
  return m ? m[1] : null;
}

/**
 * @param {string} a
 * @param {string} b
 */
function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/**
 * The short form of each id, unique among `ids`. Sorting the random parts makes the longest
 * shared prefix of each one's a neighbour's, so a list of thousands costs one sort.
 * @param {string[]} ids
 * @returns {Map<string, string>} id → short form
 */
export function shortIds(ids) {
  const randoms = [...new Set(ids.map(randomPart).filter((r) => r !== null))].sort();
  /** @type {Map<string, number>} */
  const shared = new Map();
  for (let i = 0; i < randoms.length; i++) {
    const prev = i > 0 ? commonPrefix(randoms[i], randoms[i - 1]) : 0;
    const next = i + 1 < randoms.length ? commonPrefix(randoms[i], randoms[i + 1]) : 0;
    shared.set(randoms[i], Math.max(prev, next));
  }
  /** @type {Map<string, string>} */
  const out = new Map();
  for (const id of ids) {
    const r = randomPart(id);
    if (r === null) {
      out.set(id, id);
      continue;
    }
    const n = Math.min(r.length, Math.max(MIN_SHORT, (shared.get(r) ?? 0) + 1));
    out.set(id, r.slice(0, n));
  }
  return out;
}
