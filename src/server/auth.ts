/**
 * Bearer-key authentication: keys compared in constant time (on SHA-256 digests) and never logged,
 * checked by one middleware that the route table puts in front of every route not declared public.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { HttpError } from './http-error.js';

const CHALLENGE = { 'www-authenticate': 'Bearer' };

/** Checks `Authorization: Bearer <key>` headers against a fixed set of keys. */
export class ApiKeyChecker {
  private readonly digests: readonly Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = keys.map(digest);
  }

  /**
   * Throws a 401 {@link HttpError} unless the header carries one of the keys. Returns who calls:
   * the SHA-256 (hex) of the key, which tells callers apart without keeping the key.
   */
  check(authorization: string | null | undefined): string {
    if (authorization === null || authorization === undefined || authorization.trim() === '') {
      throw new HttpError(401, 'Missing API key: send `Authorization: Bearer <key>`', CHALLENGE);
    }
    const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match === null) throw new HttpError(401, 'Malformed Authorization header: expected `Bearer <key>`', CHALLENGE);
    const candidate = digest(match[1] as string);
    // Compare against every key without stopping early, so timing does not tell which key matched.
    let accepted = false;
    for (const known of this.digests) accepted = timingSafeEqual(candidate, known) || accepted;
    if (!accepted) throw new HttpError(401, 'Invalid API key', CHALLENGE);
    return candidate.toString('hex');
  }
}

/** What the key middleware leaves on the request's context for the handlers after it. */
export interface AuthVariables {
  /** Who calls: the SHA-256 (hex) of the key the request carried (see {@link ApiKeyChecker.check}). */
  principal: string;
}

/**
 * The middleware that protects a route: a 401 (with `www-authenticate: Bearer`) unless the request
 * carries one of the keys; otherwise it records the caller (`principal`) and hands on.
 */
export function requireApiKey(keys: ApiKeyChecker): MiddlewareHandler<{ Variables: AuthVariables }> {
  return async (context, next) => {
    context.set('principal', keys.check(context.req.header('authorization')));
    await next();
  };
}

/**
 * The caller that {@link requireApiKey} recorded for this request. Throws when the route is
 * public (no key was checked): a handler that needs a caller must not be registered public.
 */
export function callerOf(context: Context): string {
  const principal: unknown = context.get('principal');
  if (typeof principal !== 'string')
    throw new Error(
      `${context.req.method} ${context.req.path} needs a caller, but its route is public (no key checked)`,
    );
  return principal;
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}
