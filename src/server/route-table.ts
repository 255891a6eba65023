/**
 * The service's routes, registered on Hono from their entries in the operations table
 * (`operations.ts`, which the OpenAPI document is written from). Every route is protected by the
 * API key middleware unless its operation is marked `public`: a new route needs a key unless its
 * entry says otherwise. A known path with the wrong method is answered 405 with `Allow` by Hono's
 * `methodNotAllowed` middleware (see `app.ts`), which reads the routes registered here.
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Operation, OperationMethod } from './operations.js';

/** A route handler. */
export type RouteHandler = (context: Context) => Promise<Response>;

/** HTTP methods the service routes. */
export type RouteMethod = OperationMethod;

/** Registers routes on a Hono app, each behind the API key unless its operation is public. */
export class RouteTable {
  // Any Hono app: the routes do not depend on the app's context variables.
  // biome-ignore lint/suspicious/noExplicitAny: any Hono app, whatever its context variables
  private readonly app: Hono<any>;
  // biome-ignore lint/suspicious/noExplicitAny: as above
  private readonly authenticate: MiddlewareHandler<any>;

  /**
   * @param app The Hono app to register on.
   * @param authenticate The middleware in front of every route not registered public (it
   *   answers 401 itself, or records the caller and hands on).
   */
  // biome-ignore lint/suspicious/noExplicitAny: as above
  constructor(app: Hono<any>, authenticate: MiddlewareHandler<any>) {
    this.app = app;
    this.authenticate = authenticate;
  }

  /**
   * Registers `handler` for `operation` (its method on its path, `{param}` segments), behind the
   * API key unless the operation is `public`: a request without a valid key is then answered 401
   * before `handler` runs. Public operations are only for what a caller needs before it has a key,
   * or what reveals nothing that a key protects (health, the dashboard's page and assets).
   */
  add(operation: Operation, handler: RouteHandler): void {
    const path = operation.path.replace(/\{([^}]+)\}/g, ':$1');
    if (operation.public === true) this.app.on(operation.method, path, handler);
    else this.app.on(operation.method, path, this.authenticate, handler);
  }
}
