/**
 * `Idempotency-Key` on the POSTs that write (model create, log, training jobs, SFT jobs), so that
 * a client may retry them safely: the first successful answer to a key is stored with the write
 * it answers, in one transaction, and a retry with the same key and the same request gets that
 * answer again instead of writing twice. This module keeps the stored answers and the request
 * hash; `idempotent-write.ts` wraps the routes.
 */
import { createHash } from 'node:crypto';
import { HttpError } from './http-error.js';
import type { IdempotencyKeyStore, IdempotencyRecord } from './store/index.js';

/** The request header that carries the key (case-insensitive on the wire). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** The response header set on an answer replayed from a stored key. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** Longest accepted key. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Storing a key deletes expired ones at most this often (and at start). */
const PRUNE_INTERVAL_MS = 60_000;

/** The keys of one service instance: the stored answers, and the keys of requests in flight. */
export class IdempotencyKeys {
  private readonly answers: IdempotencyKeyStore;
  private readonly retentionMs: number;
  private readonly inFlight = new Set<string>();
  private lastPrune = Number.NEGATIVE_INFINITY;

  /** Deletes the keys that expired while the service was not running. */
  constructor(answers: IdempotencyKeyStore, retentionMs: number) {
    this.answers = answers;
    this.retentionMs = retentionMs;
    this.prune();
  }

  /** Deletes the answers older than the retention; returns how many went. */
  prune(): number {
    this.lastPrune = Date.now();
    return this.answers.prune(this.cutoff());
  }

  /**
   * Marks `key` of `principal` as in flight until `release` is called; a 409 when it already is
   * (a retry that overtook the request it repeats).
   */
  claim(principal: string, key: string): { release(): void } {
    const slot = `${principal}\n${key}`;
    if (this.inFlight.has(slot)) {
      throw new HttpError(
        409,
        `A request with this ${IDEMPOTENCY_KEY_HEADER} is still being handled; retry once it has been answered, and the retry gets its answer`,
        { 'retry-after': '1' },
      );
    }
    this.inFlight.add(slot);
    return { release: () => this.inFlight.delete(slot) };
  }

  /** The unexpired answer stored for the key, if any. */
  find(principal: string, key: string): IdempotencyRecord | undefined {
    return this.answers.find(principal, key, this.cutoff());
  }

  /** Stores an answer (call inside the write's transaction); deletes expired ones now and then. */
  save(record: Omit<IdempotencyRecord, 'created_at'>): void {
    const now = Date.now();
    this.answers.save({ ...record, created_at: new Date(now).toISOString() });
    if (now - this.lastPrune >= Math.min(PRUNE_INTERVAL_MS, this.retentionMs)) this.prune();
  }

  private cutoff(): string {
    return new Date(Math.max(0, Date.now() - this.retentionMs)).toISOString();
  }
}

/**
 * Bodies up to this many bytes are compared by their JSON value (canonical JSON), larger ones by
 * their bytes: canonical JSON costs about 3x `JSON.parse` of the body, which matters for big logs.
 */
export const CANONICAL_HASH_MAX_BYTES = 64 * 1024;

/**
 * SHA-256 (hex) of the method, the path and the body: for a body of up to
 * {@link CANONICAL_HASH_MAX_BYTES} bytes, its canonical JSON (keys sorted at every level, so key
 * order and whitespace do not matter); for a larger one, its text as received (`raw:` prefix), so a
 * retry of a large request must resend the same bytes (the log batcher does).
 */
export function hashRequest(method: string, path: string, body: unknown, text?: string): string {
  const hash = createHash('sha256').update(`${method} ${path}\n`);
  if (text !== undefined && Buffer.byteLength(text, 'utf8') > CANONICAL_HASH_MAX_BYTES) {
    return `raw:${hash.update(text).digest('hex')}`;
  }
  return hash.update(canonicalJson(body)).digest('hex');
}

/**
 * JSON with object keys sorted, so that bodies that parse to the same value (whatever their key
 * order and whitespace) give the same text. (JavaScript puts integer-like keys first, in numeric
 * order: still one order per set of keys.) Built as a sorted copy serialized by the native
 * `JSON.stringify`, which measured about three times as fast as concatenating the text in
 * JavaScript; it still costs about 3x `JSON.parse` of the body.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortedCopy(value)) ?? 'null';
}

/** A copy of a parsed JSON value with each object's keys inserted in sorted order (at most 256 levels deep, see `readJsonBody`). */
function sortedCopy(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const copy: unknown[] = new Array(value.length);
    for (let index = 0; index < value.length; index += 1) copy[index] = sortedCopy(value[index]);
    return copy;
  }
  const record = value as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(record).sort()) {
    const child = sortedCopy(record[key]);
    // A plain assignment to `__proto__` would set the prototype instead of adding the key.
    if (key === '__proto__') Object.defineProperty(copy, key, { value: child, enumerable: true, writable: true });
    else copy[key] = child;
  }
  return copy;
}
