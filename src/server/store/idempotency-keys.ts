/** The `idempotency_keys` table: the stored answer to each caller's `Idempotency-Key`. */
import type { StoreConnection } from './connection.js';

/** The stored answer to an `Idempotency-Key`. Times are ISO 8601 strings. */
export interface IdempotencyRecord {
  /** SHA-256 (hex) of the caller's API key: keys of different callers never collide. */
  readonly principal: string;
  readonly key: string;
  /** SHA-256 (hex) of the method, the path and the canonical JSON of the body. */
  readonly request_hash: string;
  readonly method: string;
  readonly path: string;
  readonly status: number;
  /** The JSON body that was answered, byte for byte. */
  readonly response_body: string;
  readonly created_at: string;
}

/**
 * The stored answers. Saved inside the transaction of the write they answer (see
 * `idempotent-write.ts`), so that neither exists without the other.
 */
export class IdempotencyKeyStore {
  /** @param connection The store's connection. */
  constructor(private readonly connection: StoreConnection) {}

  /** The answer stored for `key` of `principal`, unless it was created before `notBefore`. */
  find(principal: string, key: string, notBefore: string): IdempotencyRecord | undefined {
    return this.connection
      .prepare('SELECT * FROM idempotency_keys WHERE principal = ? AND key = ? AND created_at >= ?')
      .get(principal, key, notBefore) as IdempotencyRecord | undefined;
  }

  /** Stores the answer to a key, replacing an expired one not yet pruned. */
  save(record: IdempotencyRecord): void {
    this.connection
      .prepare(
        `INSERT OR REPLACE INTO idempotency_keys (principal, key, request_hash, method, path, status, response_body, created_at)
         VALUES (@principal, @key, @request_hash, @method, @path, @status, @response_body, @created_at)`,
      )
      .run(record);
  }

  /** Deletes the answers created before `before`; returns how many went. */
  prune(before: string): number {
    return this.connection.prepare('DELETE FROM idempotency_keys WHERE created_at < ?').run(before).changes;
  }
}
