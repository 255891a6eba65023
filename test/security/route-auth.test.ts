/**
 * Every route the app registers asks for a key, except an explicit public list. The routes are
 * read from the app's own router, not from a hand list: a route added later is covered without
 * touching this file, and fails here if it answers without a key and is not on the list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registeredRoutes } from '../../src/server/app.js';
import { startApp, type TestApp } from '../server/support/harness.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';

/**
 * What answers without a key: health and the system check (monitors call them before any key is
 * at hand), the base-model list, the service's OpenAPI document, and the dashboard's page and
 * assets (the page asks for the key).
 */
const PUBLIC = [
  'GET /',
  'GET /assets/:file',
  'GET /openapi.json',
  'GET /v1/health',
  'GET /v1/preview/base-models',
  'GET /v1/system-check',
];

/** A value for each path parameter the routes use (an unknown id: the key is checked first). */
const PARAMETERS: Record<string, string> = {
  model_id: '00000000-0000-4000-8000-000000000000',
  training_job_id: '00000000-0000-4000-8000-000000000000',
  file: 'dashboard.js',
};

let service: TestApp;
beforeAll(async () => {
  service = await startApp({ engine: createStandInEngine() });
});
afterAll(async () => {
  await service.close();
});

function concretePath(pattern: string): string {
  return pattern.replace(/:([a-z_]+)/g, (_, name: string) => {
    const value = PARAMETERS[name];
    if (value === undefined) throw new Error(`Add a value for the path parameter :${name} to PARAMETERS`);
    return value;
  });
}

describe('the API key on every route', () => {
  it('reads the routes from the app: every keyed operation of the contract and the local routes', () => {
    const routes = registeredRoutes(service.app).map((route) => `${route.method} ${route.path}`);
    // A floor, not the list: the routes themselves come from the router.
    expect(routes.length).toBeGreaterThanOrEqual(22);
    expect(routes).toContain('POST /v1/chat/completions');
    expect(routes).toContain('GET /v1/local/models/:model_id/trajectory-groups');
    for (const route of PUBLIC) expect(routes).toContain(route);
  });

  it('answers 401 with the Bearer challenge on every route not on the public list, and the public ones without a key', async () => {
    const answeredWithoutKey: string[] = [];
    for (const { method, path } of registeredRoutes(service.app)) {
      const route = `${method} ${path}`;
      const init: RequestInit = { method };
      if (method !== 'GET') Object.assign(init, { body: '{}', headers: { 'content-type': 'application/json' } });
      const response = await service.request(concretePath(path), init);
      const text = await response.text();
      if (response.status !== 401) {
        answeredWithoutKey.push(route);
        continue;
      }
      expect(response.headers.get('www-authenticate'), route).toBe('Bearer');
      expect(JSON.parse(text).detail, route).toBe('Missing API key: send `Authorization: Bearer <key>`');
    }
    expect(answeredWithoutKey.sort()).toEqual([...PUBLIC].sort());
  });
});
