/** Bearer-key authentication: keys compared in constant time (on SHA-256 digests) and never logged. */
import { createHash, timingSafeEqual } from 'node:crypto';
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

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}
