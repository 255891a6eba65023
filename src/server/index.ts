/**
 * `policyloop/server`: the local training service. A web-standard `fetch` handler
 * ({@link createApp}) over a SQLite store, a job queue and the local policy engine, and
 * {@link serve} to listen on loopback. Heavy dependencies (Hono, better-sqlite3, the engine) are
 * loaded only through this entry point.
 * @module
 */
export { createApp, type App } from './app.js';
export { serve, type ServeHandle } from './listen.js';
export { DEV_API_KEY, type ServeOptions, type ServerLogger, type ServerOptions } from './options.js';
export { INTERRUPTED_MESSAGE } from './job-runner.js';
export { DATABASE_FILE } from './store/index.js';
export { isLoopbackHost } from './host-check.js';
export { openApiDocument } from './openapi-document.js';
