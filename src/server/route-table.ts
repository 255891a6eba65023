/**
 * The service's routes, registered on Hono and remembered, so that a known path with the wrong
 * method can be answered 405 (with `Allow`) instead of 404.
 */
import type { Context, Hono } from 'hono';

/** A route handler. */
export type RouteHandler = (context: Context) => Promise<Response>;

/** HTTP methods the service routes. */
export type RouteMethod = 'GET' | 'POST' | 'DELETE';

interface RouteEntry {
  readonly method: RouteMethod;
  readonly pattern: RegExp;
}

/** Registers routes on a Hono app and answers "which methods does this path allow?". */
export class RouteTable {
  // Any Hono app: the routes do not depend on the app's context variables.
  // biome-ignore lint/suspicious/noExplicitAny: any Hono app, whatever its context variables
  private readonly app: Hono<any>;
  private readonly entries: RouteEntry[] = [];

  // biome-ignore lint/suspicious/noExplicitAny: as above
  constructor(app: Hono<any>) {
    this.app = app;
  }

  /** Registers `handler` for `method` on `path` (Hono syntax, `:param` segments). */
  add(method: RouteMethod, path: string, handler: RouteHandler): void {
    this.app.on(method, path, handler);
    const source = path
      .split('/')
      .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    this.entries.push({ method, pattern: new RegExp(`^${source}$`) });
  }

  /** Methods registered for a path (empty when the path is unknown). HEAD comes with GET. */
  allowedMethods(pathname: string): string[] {
    const methods = new Set<string>();
    for (const entry of this.entries) {
      if (!entry.pattern.test(pathname)) continue;
      methods.add(entry.method);
      if (entry.method === 'GET') methods.add('HEAD');
    }
    return [...methods];
  }
}
