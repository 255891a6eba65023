/**
 * The dashboard: a static page at `/` and its assets under `/assets/`, served without a key (the
 * page asks for one and sends it with every data request). The files are plain HTML, CSS and JS
 * shipped next to this module (`src/server/dashboard/`, copied to `dist/server/dashboard/` by the
 * build); the chart library, uPlot, is served from its package.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { errorBody } from '../http-error.js';
import { DASHBOARD_ASSETS, operation } from '../operations.js';
import type { RouteTable } from '../route-table.js';

interface Asset {
  /** Absolute path of the file, or undefined when its package is not installed. */
  readonly path: () => string | undefined;
  readonly type: string;
}

const dashboardFile = (name: string) => () => fileURLToPath(new URL(`../dashboard/${name}`, import.meta.url));

function packageFile(specifier: string): () => string | undefined {
  return () => {
    try {
      return createRequire(import.meta.url).resolve(specifier);
    } catch {
      return undefined;
    }
  };
}

/** Where each file of `DASHBOARD_ASSETS` (the names and media types the OpenAPI document lists) is. */
const ASSET_PATHS: Readonly<Record<string, () => string | undefined>> = {
  'dashboard.js': dashboardFile('dashboard.js'),
  'dashboard.css': dashboardFile('dashboard.css'),
  'uplot.min.js': packageFile('uplot/dist/uPlot.iife.min.js'),
  'uplot.min.css': packageFile('uplot/dist/uPlot.min.css'),
};

const ASSETS: Readonly<Record<string, Asset>> = Object.fromEntries(
  Object.entries(DASHBOARD_ASSETS).map(([name, type]) => [name, { path: ASSET_PATHS[name] as Asset['path'], type }]),
);

const PAGE: Asset = { path: dashboardFile('index.html'), type: 'text/html; charset=utf-8' };

/**
 * The page may load only its own scripts and styles and talk only to this service; nothing may
 * frame it. (uPlot sets element styles from script, which `style-src` does not restrict.)
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** Registers `GET /` (the dashboard page) and `GET /assets/:file` (its scripts and styles). */
export function registerDashboardRoutes(routes: RouteTable): void {
  const cache = new Map<string, Promise<string | undefined>>();
  const load = (asset: Asset): Promise<string | undefined> => {
    const path = asset.path();
    if (path === undefined) return Promise.resolve(undefined);
    let text = cache.get(path);
    if (text === undefined) {
      text = readFile(path, 'utf8').catch(() => undefined);
      cache.set(path, text);
    }
    return text;
  };
  const serveAsset = async (asset: Asset | undefined): Promise<Response> => {
    const text = asset === undefined ? undefined : await load(asset);
    if (asset === undefined || text === undefined) return Response.json(errorBody(404, 'Not Found'), { status: 404 });
    return new Response(text, {
      headers: { 'content-type': asset.type, 'cache-control': 'no-cache', ...SECURITY_HEADERS },
    });
  };

  routes.add(operation('getDashboard'), async () => serveAsset(PAGE));
  routes.add(operation('getDashboardAsset'), async (context) => {
    const name = context.req.param('file') ?? '';
    return serveAsset(Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined);
  });
}
