// The JSON Schema checker the other tests rely on: it must reject what the schemas reject.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check, checkParams } from './schema.mjs';

const components = {
  Kind: { type: 'string', enum: ['agent', 'team'] },
  Item: {
    type: 'object',
    properties: { id: { type: 'string' }, n: { type: 'integer', minimum: 0 }, kind: { $ref: '#/components/schemas/Kind' } },
    required: ['id'],
    additionalProperties: false,
  },
  Either: { anyOf: [{ $ref: '#/components/schemas/Item' }, { type: 'null' }] },
};

test('check: conforming and non-conforming values', () => {
  const ref = (name) => ({ $ref: `#/components/schemas/${name}` });
  const cases = [
    [ref('Item'), { id: 'a' }, 0],
    [ref('Item'), { id: 'a', n: 3, kind: 'team' }, 0],
    [ref('Item'), { n: 3 }, 1], // missing id
    [ref('Item'), { id: 'a', extra: 1 }, 1], // unknown field
    [ref('Item'), { id: 'a', n: 1.5 }, 1], // not an integer
    [ref('Item'), { id: 'a', n: -1 }, 1], // below minimum
    [ref('Item'), { id: 'a', kind: 'skill' }, 1], // not in enum
    [ref('Item'), 'a', 1],
    [ref('Either'), null, 0],
    [ref('Either'), { id: 'x' }, 0],
    [ref('Either'), 7, 1],
    [{ type: 'array', items: ref('Kind') }, ['agent', 'team'], 0],
    [{ type: 'array', items: ref('Kind') }, ['agent', 'x', 'y'], 2],
    [{ type: ['number', 'null'] }, 2, 0],
    [{ type: 'number' }, '2', 1],
    [true, { anything: [1] }, 0],
    [false, 1, 1],
    [ref('Missing'), 1, 1],
  ];
  for (const [schema, value, errors] of cases) {
    assert.equal(check(schema, value, components).length, errors, `${JSON.stringify(schema)} ${JSON.stringify(value)}`);
  }
});

test('checkParams: by-name params', () => {
  const method = {
    name: 'm',
    params: [
      { name: 'runId', required: true, schema: { type: 'string' } },
      { name: 'limit', required: false, schema: { type: ['integer', 'null'] } },
    ],
  };
  const cases = [
    [{ runId: 'r' }, 0],
    [{ runId: 'r', limit: null }, 0],
    [{}, 1],
    [undefined, 1],
    [{ runId: 1 }, 1],
    [{ runId: 'r', limt: 5 }, 1],
    [['r'], 1],
  ];
  for (const [params, errors] of cases) {
    assert.equal(checkParams(method, params, {}).length, errors, JSON.stringify(params));
  }
  assert.deepEqual(checkParams({ name: 'ping', params: [] }, undefined, {}), []);
});
