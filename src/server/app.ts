/** The local service as a web-standard `fetch` handler: Hono routes over the store, engine and job queue. */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { Hono } from 'hono';
import { methodNotAllowed } from 'hono/method-not-allowed';
import type { Engine } from '../engine/types.js';
import { InvalidArgumentError } from '../internal/errors.js';
import { ApiKeyChecker, type AuthVariables, requireApiKey } from './auth.js';
import { type DataDirLock, lockDataDir } from './data-dir-lock.js';
import { errorBody, HttpError, RequestValidationError } from './http-error.js';
import { IdempotencyKeys } from './idempotency.js';
import { JobRunner } from './job-runner.js';
import { type ResolvedServerOptions, resolveServerOptions, type ServerOptions } from './options.js';
import { RouteTable } from './route-table.js';
import { registerDashboardRoutes } from './routes/dashboard-routes.js';
import { registerInferenceRoutes } from './routes/inference-routes.js';
import { registerJobRoutes } from './routes/job-routes.js';
import { registerLocalRoutes } from './routes/local-routes.js';
import { registerModelRoutes } from './routes/model-routes.js';
import { registerSystemRoutes } from './routes/system-routes.js';
import type { ServiceContext } from './service-context.js';
import { Store } from './store/index.js';
import { unservedRouteMessage } from './unserved-routes.js';

/** A running service instance (not yet listening: see `serve`). */
export interface App {
  /** Answers one request; never rejects (errors become responses). */
  fetch(request: Request): Promise<Response>;
  /**
   * Stops the service: new requests get 503 at once; requests in flight may finish (at most
   * `timeoutMs`, default 10 s, then their completions are stopped and answered 503); then it fails
   * queued jobs, aborts running ones (each gets its terminal event), closes the store and, when
   * the service created it, the engine.
   */
  close(timeoutMs?: number): Promise<void>;
  /** The engine the service samples and trains with. */
  readonly engine: Engine;
  /** Absolute path of the data directory (store and weight files). */
  readonly dataDir: string;
}

/** Paths that keep answering after `close` (they report the stopped state themselves). */
const ALWAYS_ON = new Set(['/v1/health', '/v1/system-check']);

/**
 * Creates the local service: opens (or creates) the store in `dataDir`, fails jobs that a
 * previous process left unfinished, and returns its `fetch` handler. Throws an
 * `InvalidArgumentError` (argument `models`) before opening anything when a folder of `models` is
 * not one the engine can serve, naming the folder and why.
 * @example
 * const app = await createApp({ dataDir: '/tmp/policyloop' });
 * const response = await app.fetch(new Request('http://local/v1/health'));
 * await app.close();
 */
export async function createApp(options: ServerOptions = {}): Promise<App> {
  const resolved = resolveServerOptions(options);
  const dataDir = resolve(resolved.dataDir);
  const settings = { ...resolved, dataDir };
  const ownsEngine = options.engine === undefined;
  const { lock, store, engine, runner, idempotency } = await openParts(options, settings);

  // Aborted when `close` stops waiting for requests in flight: their engine calls end at once.
  const stopping = new AbortController();
  // Every completion in flight listens to it: many listeners are expected, not a leak (and Node's
  // warning would reach the console).
  setMaxListeners(0, stopping.signal);
  const service: ServiceContext = {
    options: settings,
    store,
    engine,
    runner,
    idempotency,
    stopping: stopping.signal,
  };
  let closed = false;
  const hono = routedApp(service, () => closed);
  // Requests being answered, so that `close` can let them finish before the store and engine go.
  const requests = new RequestsInFlight();

  let closing: Promise<void> | undefined;
  const app: App = {
    engine,
    dataDir,
    async fetch(request: Request): Promise<Response> {
      return await requests.track(async () => {
        try {
          return await hono.fetch(request);
        } catch (error) {
          // Hono answers handler errors itself; this only catches a failure of that machinery.
          settings.logger.error(
            `${request.method} ${request.url} failed outside the routes: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
          );
          return Response.json(errorBody(500, 'Internal server error'), { status: 500 });
        }
      });
    },
    close(timeoutMs = 10_000): Promise<void> {
      closing ??= (async () => {
        closed = true;
        await requests.drain(timeoutMs);
        // Whatever still runs is stopped (a completion answers 503) and given a moment to answer.
        stopping.abort(new Error('The service stopped'));
        await requests.drain(1_000);
        await runner.close();
        store.close();
        lock.release();
        if (ownsEngine) await engine.close();
      })();
      return closing;
    },
  };
  honoApps.set(app, hono);
  return app;
}

/** What {@link openParts} opens, in the order it opens them. */
interface ServiceParts {
  readonly lock: DataDirLock;
  readonly store: Store;
  readonly engine: Engine;
  readonly runner: JobRunner;
  readonly idempotency: IdempotencyKeys;
}

/**
 * Opens the service's parts: checks the `--model` folders, locks the data directory, opens the
 * store, loads the engine (unless given), and starts the job runner, which fails the jobs a
 * previous process left unfinished. When one fails, whatever opened is closed again.
 */
async function openParts(options: ServerOptions, settings: ResolvedServerOptions): Promise<ServiceParts> {
  const { dataDir } = settings;
  const ownsEngine = options.engine === undefined;
  // A --model folder the engine cannot serve is refused before anything opens, naming why.
  if (ownsEngine && (options.models?.length ?? 0) > 0) {
    const { explicitFoldersProblem } = await import('../engine/hf/registry.js');
    const problem = explicitFoldersProblem(options.models ?? []);
    if (problem !== null) throw new InvalidArgumentError('models', problem);
  }
  // Lock and store first: a directory in use is refused before the engine is loaded.
  mkdirSync(dataDir, { recursive: true });
  const lock = lockDataDir(dataDir);
  let store: Store | undefined;
  let engine: Engine | undefined;
  try {
    store = Store.openIn(dataDir);
    // Deletes the keys that expired while no service ran.
    const idempotency = new IdempotencyKeys(store.idempotencyKeys, settings.idempotencyKeyRetentionMs);
    engine = options.engine ?? (await loadDefaultEngine(options.models ?? []));
    const runner = new JobRunner({
      store,
      engine,
      dataDir,
      maxConcurrentJobs: settings.maxConcurrentJobs,
      logger: settings.logger,
      jobTimeoutMs: settings.jobTimeoutMs,
      maxTrainingDataBytes: settings.maxTrainingDataBytes,
      trainingDataAccess: settings.trainingData,
    });
    const failed = await runner.failInterruptedJobs();
    if (failed > 0) settings.logger.warn(`failed ${failed} job(s) left unfinished by a previous process`);
    return { lock, store, engine, runner, idempotency };
  } catch (error) {
    store?.close();
    lock.release();
    if (ownsEngine) await engine?.close();
    throw error;
  }
}

/**
 * The Hono app of a service: the request id, 405s, the stopped state, every route, and the 404,
 * 422 and 5xx answers in the service's error shape. `isClosed` says whether `close` has begun.
 */
function routedApp(service: ServiceContext, isClosed: () => boolean): Hono<{ Variables: ServiceVariables }> {
  const hono = new Hono<{ Variables: ServiceVariables }>();
  // Every route needs a key unless its operation (operations.ts) is marked public.
  const routes = new RouteTable(hono, requireApiKey(new ApiKeyChecker(service.options.apiKeys)));

  hono.use('*', async (context, next) => {
    // Every answer carries an id that a client can quote and that the logger's notes carry too.
    // Not `hono/request-id`: it takes a client's own `X-Request-Id` as the id (ours are always
    // `req_<32 hex>` the service minted), and it sets the header before the handler, so a
    // Response a handler builds itself (the dashboard's files, a streamed completion) has none.
    const requestId = `req_${randomUUID().replaceAll('-', '')}`;
    context.set('requestId', requestId);
    await next();
    context.res.headers.set('x-request-id', requestId);
  });
  // A known path with another method: 405 with `Allow` (its registered methods, HEAD with GET),
  // in the service's error shape, before any key is asked for (the key is a route's own middleware).
  hono.use(
    methodNotAllowed({
      app: hono,
      onMethodNotAllowed: (context, methods) =>
        context.json(errorBody(405, 'Method Not Allowed'), 405, { allow: methods.join(', ') }),
    }),
  );
  hono.use('*', async (context, next) => {
    if (isClosed() && !ALWAYS_ON.has(context.req.path)) throw new HttpError(503, 'The service is stopped');
    await next();
  });
  registerSystemRoutes(routes, service);
  registerModelRoutes(routes, service);
  registerJobRoutes(routes, service);
  registerInferenceRoutes(routes, service);
  registerLocalRoutes(routes, service);
  registerDashboardRoutes(routes);

  hono.notFound((context) => {
    const unserved = unservedRouteMessage(context.req.method, context.req.path);
    return context.json(errorBody(404, unserved ?? 'Not Found'), 404);
  });
  hono.onError((error, context) => {
    if (error instanceof RequestValidationError) return context.json(errorBody(422, error.issues), 422);
    if (error instanceof HttpError)
      return context.json(errorBody(error.status, error.message), error.status as 400, error.headers);
    // A request that outlived `close` found the store or engine gone: the service is stopped, not broken.
    if (isClosed()) return context.json(errorBody(503, 'The service is stopped'), 503);
    service.options.logger.error(
      `${context.req.method} ${context.req.path} (${context.get('requestId')}) failed: ${error.stack ?? error.message}`,
    );
    return context.json(errorBody(500, 'Internal server error'), 500);
  });
  return hono;
}

/** The variables a request's context carries: its id and, past the key check, its caller. */
type ServiceVariables = { requestId: string } & AuthVariables;

/** Counts the requests being answered, so that `close` can wait for them (up to a time). */
class RequestsInFlight {
  private count = 0;
  private drained: (() => void) | undefined;

  /** Runs `answer`, counted as in flight until it settles. */
  async track(answer: () => Promise<Response>): Promise<Response> {
    this.count += 1;
    try {
      return await answer();
    } finally {
      this.count -= 1;
      if (this.count === 0) this.drained?.();
    }
  }

  /** Resolves when no request is in flight, or after `timeoutMs`, whichever comes first. */
  async drain(timeoutMs: number): Promise<void> {
    if (this.count === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolveDrained) => {
        this.drained = resolveDrained;
      }),
      new Promise<void>((resolveTimeout) => {
        timer = setTimeout(resolveTimeout, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: any Hono app, whatever its context variables
const honoApps = new WeakMap<App, Hono<any>>();

/** One route as Hono holds it: a method and a path pattern (`:param` segments). */
export interface RegisteredRoute {
  readonly method: string;
  readonly path: string;
}

/**
 * Every route `app` answers, read from its Hono router (middleware left out), each method and
 * path once. Internal: the test that every route asks for a key unless it is public reads it.
 */
export function registeredRoutes(app: App): RegisteredRoute[] {
  const hono = honoApps.get(app);
  if (hono === undefined) throw new Error('Expected an app made by createApp');
  const seen = new Map<string, RegisteredRoute>();
  for (const route of hono.routes) {
    if (route.method === 'ALL') continue;
    seen.set(`${route.method} ${route.path}`, { method: route.method, path: route.path });
  }
  return [...seen.values()];
}

/** Loads the local engine only when it is needed, so importing the server stays cheap. */
async function loadDefaultEngine(models: readonly string[]): Promise<Engine> {
  const module = (await import('../engine/index.js')) as {
    createEngine(options: { models: readonly string[] }): Promise<Engine>;
  };
  return await module.createEngine({ models });
}
