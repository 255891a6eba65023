/**
 * `GET /openapi.json`: the service's own OpenAPI 3.1 document. It is public; it lists exactly the
 * routes the service registers, each with every status it can answer; its schemas are valid JSON
 * Schema 2020-12; its stricter rules (required `trajectories`, the names, the base models, the
 * training data URLs) are the ones the service applies, tried on both sides; and
 * `openApiDocument()` (`serve --print-openapi`) writes the same document without a service. (Every
 * answer of the server tests is checked against it by the harness; test/server/contract.test.ts
 * runs schemathesis with it.)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, openApiDocument } from 'policyloop/server';
import { registeredRoutes } from '../../src/server/app.js';
import { startApp, type TestApp } from './support/harness.js';
import { createStandInEngine } from './support/stand-in-engine.js';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

interface OperationObject {
  operationId: string;
  security?: unknown[];
  parameters?: { name: string; in: string; schema: unknown }[];
  requestBody?: { content: Record<string, { schema: { $ref: string } }> };
  responses: Record<string, unknown>;
}
interface OpenApi {
  openapi: string;
  security: unknown[];
  paths: Record<string, Record<string, OperationObject>>;
  components: {
    schemas: Record<string, Record<string, any>>;
    securitySchemes: Record<string, unknown>;
    responses: Record<string, unknown>;
  };
}

let service: TestApp;
let document: OpenApi;

beforeAll(async () => {
  service = await startApp({ engine: createStandInEngine() });
  const answer = await service.call<OpenApi>('GET', '/openapi.json', { auth: false });
  expect(answer.status).toBe(200);
  document = answer.body;
});
afterAll(async () => {
  await service?.close();
});

function operations(): [string, string, OperationObject][] {
  return Object.entries(document.paths).flatMap(([route, item]) =>
    Object.entries(item).map(([method, operation]): [string, string, OperationObject] => [
      method.toUpperCase(),
      route,
      operation,
    ]),
  );
}

let ajv: Ajv2020 | undefined;
/** A validator of the document's schema at `pointer` (its `$ref`s resolved in the document). */
function validator(pointer: string) {
  if (ajv === undefined) {
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormatsModule.default(ajv);
    ajv.addSchema(document, 'own');
  }
  return ajv.compile({ $ref: `own#${pointer}` });
}

describe('GET /openapi.json', () => {
  it('is public, OpenAPI 3.1, with the bearer key as its security scheme', async () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.components.securitySchemes).toEqual({
      HTTPBearer: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
    expect(document.security).toEqual([{ HTTPBearer: [] }]);
  });

  it('lists exactly the routes the service answers, each with every status it can answer', () => {
    const routes = registeredRoutes(service.app).map(
      (route) => `${route.method} ${route.path.replace(/:([a-z_]+)/g, '{$1}')}`,
    );
    const listed = operations().map(([method, route]) => `${method} ${route}`);
    expect(listed.sort()).toEqual(routes.sort());
    const ids = operations().map(([, , operation]) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    const publicOnes: string[] = [];
    for (const [method, route, operation] of operations()) {
      const label = `${method} ${route}`;
      const statuses = Object.keys(operation.responses);
      expect(statuses, label).toEqual(expect.arrayContaining(['200', '421', '503']));
      if (operation.security?.length === 0) publicOnes.push(label);
      else expect(statuses, label).toContain('401');
      if (operation.requestBody !== undefined) expect(statuses, label).toEqual(expect.arrayContaining(['413', '422']));
      if (route.includes('{model_id}') || route.includes('{training_job_id}')) expect(statuses, label).toContain('404');
    }
    expect(publicOnes.sort()).toEqual([
      'GET /',
      'GET /assets/{file}',
      'GET /openapi.json',
      'GET /v1/health',
      'GET /v1/preview/base-models',
      'GET /v1/system-check',
    ]);
    expect(Object.keys(document.paths['/v1/preview/models']?.['post']?.responses ?? {})).toContain('409');
  });

  it('is made of valid JSON Schema 2020-12 (every component and parameter compiles)', () => {
    for (const name of Object.keys(document.components.schemas))
      expect(() => validator(`/components/schemas/${name}`), name).not.toThrow();
    for (const [method, route, operation] of operations())
      for (const [index] of (operation.parameters ?? []).entries())
        expect(
          () =>
            validator(
              `/paths/${route.replaceAll('~', '~0').replaceAll('/', '~1')}/${method.toLowerCase()}/parameters/${index}/schema`,
            ),
          `${method} ${route}`,
        ).not.toThrow();
  });

  it('states the stricter rules: trajectories required, names, base models', async () => {
    expect(document.components.schemas['TrajectoryGroup']?.['required']).toContain('trajectories');
    const models = await service.call<string[]>('GET', '/v1/preview/base-models', { auth: false });
    expect(document.components.schemas['ModelCreate']?.['properties'].base_model.enum).toEqual(models.body);
    const body = validator('/components/schemas/ModelCreate');
    const cases: [Record<string, unknown>, boolean][] = [
      [{ project: 'p', name: 'n', base_model: 'policyloop/tiny-chat' }, true],
      [{ project: 'projet-été', name: 'modèle.v1', base_model: 'policyloop/tiny-chat' }, true],
      [{ project: '', name: 'n', base_model: 'policyloop/tiny-chat' }, false],
      [{ project: 'a/b', name: 'n', base_model: 'policyloop/tiny-chat' }, false],
      [{ project: 'p', name: 'a b', base_model: 'policyloop/tiny-chat' }, false],
      [{ project: 'p', name: 'a\u001bb', base_model: 'policyloop/tiny-chat' }, false],
      [{ project: 'p', name: 'n', base_model: 'Qwen/Qwen3-0.6B' }, false],
    ];
    for (const [index, [model, valid]] of cases.entries()) {
      expect(body(model), JSON.stringify(model)).toBe(valid);
      // The service agrees: what the document takes is registered, what it refuses is a 422.
      const unique = { ...model, name: `${model['name'] as string}${index}` };
      const answer = await service.call('POST', '/v1/preview/models', { body: unique });
      expect(answer.status, JSON.stringify(model)).toBe(valid ? 200 : 422);
    }
  });

  it('states which training data URLs this service reads, as the service checks them', async () => {
    const url = validator('/components/schemas/CreateSFTTrainingJob/properties/training_data_url');
    const sftFile = `${pathToFileURL(service.dataDir).href}/p/models/n/sft-data/rows.jsonl`;
    const cases: [string, boolean][] = [
      ['data:application/jsonl;base64,e30=', true],
      ['data:,{}', true],
      [sftFile, true],
      ['', false],
      ['rows.jsonl', false],
      ['file:///etc/passwd', false],
      [`${pathToFileURL(service.dataDir).href}/p/models/n/sft-data/../../../../etc/passwd`, false],
      ['wandb-artifact:///entity/project/rows:v0', false],
      ['https://example.com/rows.jsonl', false],
      ['ftp://example.com/rows.jsonl', false],
    ];
    for (const [value, valid] of cases) {
      expect(url(value), value).toBe(valid);
      // A URL the document takes passes validation and the unknown model is a 404; one it refuses is a 422.
      const answer = await service.call('POST', '/v1/preview/sft-training-jobs', {
        body: { model_id: UNKNOWN_ID, training_data_url: value },
      });
      expect(answer.status, value).toBe(valid ? 404 : 422);
    }
  });
});

describe('openApiDocument() (serve --print-openapi)', () => {
  it('writes the document GET /openapi.json answers for the same options, without a service', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'policyloop-openapi-'));
    const hub = mkdtempSync(path.join(tmpdir(), 'policyloop-empty-hub-'));
    const saved = process.env['HF_HUB_CACHE'];
    process.env['HF_HUB_CACHE'] = hub;
    try {
      const printed = await openApiDocument({ dataDir, port: 0, trainingDataRoots: [hub] });
      const app = await createApp({ dataDir, trainingDataRoots: [hub] });
      try {
        const served = (await (await app.fetch(new Request('http://127.0.0.1:8765/openapi.json'))).json()) as Record<
          string,
          unknown
        >;
        expect(served['servers']).toEqual([{ url: 'http://127.0.0.1:8765' }]);
        const { servers: _servers, ...rest } = served;
        expect(printed).toEqual(rest);
      } finally {
        await app.close();
      }
    } finally {
      if (saved === undefined) delete process.env['HF_HUB_CACHE'];
      else process.env['HF_HUB_CACHE'] = saved;
    }
  });
});
