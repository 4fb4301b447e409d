// A small JSON Schema checker for the subset proto-docs/openrpc.json uses (what schemars emits):
// enough to hold documented examples and live answers to the published contract.

const REF_PREFIX = '#/components/schemas/';

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(want, v) {
  const got = typeOf(v);
  if (want === got) return true;
  return want === 'number' && got === 'integer';
}

/**
 * Problems of `value` against `schema`, as `path: reason` strings (empty when it conforms).
 * @param {unknown} schema
 * @param {unknown} value
 * @param {Record<string, unknown>} components `components.schemas` of the OpenRPC document
 * @param {string} [at]
 * @returns {string[]}
 */
export function check(schema, value, components, at = '$') {
  if (schema === true || schema === undefined) return [];
  if (schema === false) return [`${at}: no value is allowed here`];
  if (typeof schema !== 'object' || schema === null) return [`${at}: bad schema`];
  const s = /** @type {Record<string, any>} */ (schema);
  if (s.$ref !== undefined) {
    const name = String(s.$ref).startsWith(REF_PREFIX) ? s.$ref.slice(REF_PREFIX.length) : null;
    if (name === null || !(name in components)) return [`${at}: unresolvable $ref ${s.$ref}`];
    return check(components[name], value, components, at);
  }
  const errs = [];
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((t) => typeMatches(t, value))) {
      return [`${at}: expected ${types.join(' or ')}, got ${typeOf(value)}`];
    }
  }
  if (s.enum !== undefined && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    errs.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  }
  if (s.const !== undefined && JSON.stringify(s.const) !== JSON.stringify(value)) {
    errs.push(`${at}: expected ${JSON.stringify(s.const)}`);
  }
  if (typeof value === 'number' && typeof s.minimum === 'number' && value < s.minimum) {
    errs.push(`${at}: ${value} < minimum ${s.minimum}`);
  }
  for (const key of ['anyOf', 'oneOf']) {
    if (s[key] !== undefined) {
      const branches = s[key].map((b) => check(b, value, components, at));
      if (!branches.some((b) => b.length === 0)) {
        errs.push(`${at}: matches none of ${key}: ${branches.map((b) => b.join('; ')).join(' | ')}`);
      }
    }
  }
  if (s.allOf !== undefined) {
    for (const b of s.allOf) errs.push(...check(b, value, components, at));
  }
  if (typeOf(value) === 'object') {
    const obj = /** @type {Record<string, unknown>} */ (value);
    const props = s.properties ?? {};
    for (const r of s.required ?? []) {
      if (!(r in obj)) errs.push(`${at}: missing required field "${r}"`);
    }
    for (const [k, v] of Object.entries(obj)) {
      if (k in props) errs.push(...check(props[k], v, components, `${at}.${k}`));
      else if (s.additionalProperties === false) errs.push(`${at}: unknown field "${k}"`);
      else if (s.additionalProperties !== undefined) {
        errs.push(...check(s.additionalProperties, v, components, `${at}.${k}`));
      }
    }
  }
  if (Array.isArray(value) && s.items !== undefined) {
    value.forEach((v, i) => errs.push(...check(s.items, v, components, `${at}[${i}]`)));
  }
  return errs;
}

/**
 * Problems of a by-name params object against a method's OpenRPC param list.
 * @param {{name: string, params?: {name: string, required?: boolean, schema: unknown}[]}} method
 * @param {unknown} params
 * @param {Record<string, unknown>} components
 * @returns {string[]}
 */
export function checkParams(method, params, components) {
  const list = method.params ?? [];
  if (params === undefined || (Array.isArray(params) && params.length === 0)) {
    return list.filter((p) => p.required).map((p) => `params: missing required "${p.name}"`);
  }
  if (typeOf(params) !== 'object') return [`params: expected an object, got ${typeOf(params)}`];
  const obj = /** @type {Record<string, unknown>} */ (params);
  const errs = [];
  for (const p of list) {
    if (p.required && !(p.name in obj)) errs.push(`params: missing required "${p.name}"`);
  }
  for (const [k, v] of Object.entries(obj)) {
    const p = list.find((q) => q.name === k);
    if (!p) errs.push(`params: unknown param "${k}"`);
    else errs.push(...check(p.schema, v, components, `params.${k}`));
  }
  return errs;
}
