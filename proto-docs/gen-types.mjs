#!/usr/bin/env node
// TypeScript declarations of crewd's API, generated from proto-docs/openrpc.json so that editor
// extensions get the same contract the daemon is checked against.
//
//   node proto-docs/gen-types.mjs                  writes proto-docs/crew-api.d.ts
//   node proto-docs/gen-types.mjs --out FILE       writes FILE instead
//   node proto-docs/gen-types.mjs --in DOC.json    reads another OpenRPC document
//
// Only the JSON Schema subset that schemars emits is understood; anything else is an error
// rather than a silently loose `unknown`, so a new construct in the API shows up here first.

import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const REF_PREFIX = '#/components/schemas/';
const KNOWN_KEYWORDS = new Set([
  '$ref', 'type', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', 'properties', 'required',
  'additionalProperties', 'items', 'description', 'format', 'minimum', 'maximum', 'default',
  'title', 'examples', 'deprecated', 'minLength', 'maxLength', 'minItems', 'maxItems',
  'nullable', 'readOnly', 'writeOnly', 'pattern',
]);

/** A TypeScript type expression for one JSON Schema. */
function tsType(schema, ctx, indent) {
  if (schema === true) return 'unknown';
  if (schema === false) return 'never';
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    throw new Error(`${ctx}: not a JSON Schema: ${JSON.stringify(schema)}`);
  }
  for (const key of Object.keys(schema)) {
    if (!KNOWN_KEYWORDS.has(key) && !key.startsWith('x-')) {
      throw new Error(`${ctx}: unsupported JSON Schema keyword "${key}"`);
    }
  }
  if (schema.$ref !== undefined) {
    if (!schema.$ref.startsWith(REF_PREFIX)) throw new Error(`${ctx}: unsupported $ref ${schema.$ref}`);
    return schema.$ref.slice(REF_PREFIX.length);
  }
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum !== undefined) return union(schema.enum.map((v) => JSON.stringify(v)));
  if (schema.anyOf !== undefined || schema.oneOf !== undefined) {
    const members = schema.anyOf ?? schema.oneOf;
    return union(members.map((m, i) => tsType(m, `${ctx}.anyOf[${i}]`, indent)));
  }
  if (schema.allOf !== undefined) {
    return schema.allOf.map((m, i) => paren(tsType(m, `${ctx}.allOf[${i}]`, indent))).join(' & ');
  }
  if (schema.type === undefined) {
    // `{}` or `{"default": null}`: any JSON value.
    return schema.properties ? objectType(schema, ctx, indent) : 'unknown';
  }
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  return union(types.map((t) => {
    switch (t) {
      case 'string': return 'string';
      case 'integer':
      case 'number': return 'number';
      case 'boolean': return 'boolean';
      case 'null': return 'null';
      case 'array': {
        const item = schema.items === undefined ? 'unknown' : tsType(schema.items, `${ctx}.items`, indent);
        return `${paren(item)}[]`;
      }
      case 'object': return objectType(schema, ctx, indent);
      default: throw new Error(`${ctx}: unsupported type "${t}"`);
    }
  }));
}

function union(parts) {
  const unique = [...new Set(parts)];
  if (unique.length === 0) return 'never';
  return unique.join(' | ');
}

function paren(t) {
  return /[|&]/.test(t) ? `(${t})` : t;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
function propName(name) {
  return IDENT.test(name) ? name : JSON.stringify(name);
}

function docComment(text, indent) {
  if (!text) return '';
  const lines = String(text).replace(/\*\//g, '*\\/').split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l ? ` ${l}` : ''}`).join('\n')}\n${indent} */\n`;
}

/** `{ a: T; b?: U }` for an object schema; index signatures for open objects. */
function objectType(schema, ctx, indent) {
  const props = schema.properties ?? {};
  const names = Object.keys(props);
  const required = new Set(schema.required ?? []);
  const extra = schema.additionalProperties;
  if (names.length === 0) {
    if (extra === false) return 'Record<string, never>';
    if (extra === undefined || extra === true) return '{ [key: string]: unknown }';
    return `{ [key: string]: ${tsType(extra, `${ctx}.additionalProperties`, indent)} }`;
  }
  const inner = `${indent}  `;
  let out = '{\n';
  for (const name of names) {
    const p = props[name];
    out += docComment(p && typeof p === 'object' ? p.description : undefined, inner);
    const opt = required.has(name) ? '' : '?';
    out += `${inner}${propName(name)}${opt}: ${tsType(p, `${ctx}.${name}`, inner)};\n`;
  }
  if (extra !== undefined && extra !== false) {
    // An index signature must admit every named property's type too.
    out += `${inner}[key: string]: unknown;\n`;
  }
  return `${out}${indent}}`;
}

function paramsType(method, indent) {
  if (method.paramStructure && method.paramStructure !== 'by-name') {
    throw new Error(`${method.name}: unsupported paramStructure ${method.paramStructure}`);
  }
  const params = method.params ?? [];
  if (params.length === 0) return 'Record<string, never>';
  const inner = `${indent}  `;
  let out = '{\n';
  for (const p of params) {
    out += docComment(p.description ?? p.schema?.description, inner);
    const opt = p.required ? '' : '?';
    out += `${inner}${propName(p.name)}${opt}: ${tsType(p.schema, `${method.name}(${p.name})`, inner)};\n`;
  }
  return `${out}${indent}}`;
}

function errorsType(method) {
  const codes = [...new Set((method.errors ?? []).map((e) => e.code))].sort((a, b) => a - b);
  return union(codes.map(String));
}

/** The whole declaration file for an OpenRPC document. */
export function generate(doc) {
  const schemas = doc.components?.schemas ?? {};
  let out = '';
  out += '// Generated by proto-docs/gen-types.mjs from proto-docs/openrpc.json (`make docs`).\n';
  out += '// Do not edit by hand: the Node client test fails when this file drifts from the API.\n\n';
  out += `/** Version of the API document these types were generated from. */\n`;
  out += `export type ApiVersion = ${JSON.stringify(doc.info?.version ?? '')};\n\n`;

  for (const name of Object.keys(schemas).sort()) {
    if (!IDENT.test(name)) throw new Error(`schema name "${name}" is not a TypeScript identifier`);
    const schema = schemas[name];
    const isInterface = schema && typeof schema === 'object' && schema.type === 'object'
      && schema.properties && !schema.anyOf && !schema.oneOf && !schema.allOf;
    out += docComment(schema?.description, '');
    if (isInterface) {
      out += `export interface ${name} ${objectType(schema, name, '')}\n\n`;
    } else {
      out += `export type ${name} = ${tsType(schema, name, '')};\n\n`;
    }
  }

  out += '/** Id of a WebSocket subscription, as returned by a subscribe method. */\n';
  out += 'export type SubscriptionId = number | string;\n\n';

  const subs = [];
  out += '/** Every method: its params object, its result and the application error codes it documents. */\n';
  out += 'export interface Methods {\n';
  for (const m of doc.methods ?? []) {
    const notification = m['x-notification'];
    const unsubscribe = m['x-unsubscribe'];
    const summary = m.summary ?? m.description;
    out += docComment(summary, '  ');
    const result = notification ? 'SubscriptionId' : tsType(m.result?.schema ?? true, `${m.name}(result)`, '  ');
    out += `  ${JSON.stringify(m.name)}: {\n`;
    out += `    params: ${paramsType(m, '    ')};\n`;
    out += `    result: ${result};\n`;
    out += `    errors: ${errorsType(m)};\n`;
    out += '  };\n';
    if (notification) {
      subs.push({ name: m.name, notification, unsubscribe, item: tsType(m.result?.schema ?? true, `${m.name}(item)`, '  ') });
      if (unsubscribe) {
        out += docComment(`Ends a \`${m.name}\` subscription (WebSocket only); \`false\` if it was not active.`, '  ');
        out += `  ${JSON.stringify(unsubscribe)}: {\n`;
        out += '    params: [SubscriptionId];\n';
        out += '    result: boolean;\n';
        out += '    errors: never;\n';
        out += '  };\n';
      }
    }
  }
  out += '}\n\n';
  out += 'export type MethodName = keyof Methods;\n';
  out += 'export type ParamsOf<M extends MethodName> = Methods[M]["params"];\n';
  out += 'export type ResultOf<M extends MethodName> = Methods[M]["result"];\n\n';

  out += '/** Subscribe methods: the notification method their items arrive as, and how to end them. */\n';
  out += 'export interface Subscriptions {\n';
  for (const s of subs) {
    out += `  ${JSON.stringify(s.name)}: {\n`;
    out += `    notification: ${JSON.stringify(s.notification)};\n`;
    out += `    unsubscribe: ${s.unsubscribe ? JSON.stringify(s.unsubscribe) : 'never'};\n`;
    out += `    item: ${s.item};\n`;
    out += '  };\n';
  }
  out += '}\n\n';
  out += 'export type SubscriptionName = keyof Subscriptions;\n';
  out += 'export type ItemOf<S extends SubscriptionName> = Subscriptions[S]["item"];\n\n';

  out += '/** Server-to-client notifications on a WebSocket: `{jsonrpc, method, params}`. */\n';
  out += 'export interface Notifications {\n';
  for (const s of subs) {
    out += `  ${JSON.stringify(s.notification)}: { subscription: SubscriptionId; result: ${s.item} };\n`;
  }
  out += '}\n\n';

  out += '/** A JSON-RPC error object; `data` carries details (e.g. `field`, `diagnostics`). */\n';
  out += 'export interface RpcErrorObject {\n';
  out += '  code: number;\n';
  out += '  message: string;\n';
  out += '  data?: unknown;\n';
  out += '}\n';
  return out;
}

function main(argv) {
  let input = join(HERE, 'openrpc.json');
  let output = join(HERE, 'crew-api.d.ts');
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--in' && argv[i + 1]) input = argv[++i];
    else if (arg === '--out' && argv[i + 1]) output = argv[++i];
    else {
      process.stderr.write(`usage: gen-types.mjs [--in openrpc.json] [--out crew-api.d.ts]\nunexpected argument: ${arg}\n`);
      return 2;
    }
  }
  const doc = JSON.parse(readFileSync(input, 'utf8'));
  writeFileSync(output, generate(doc));
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`gen-types: ${e.message}\n`);
    process.exitCode = 1;
  }
}
