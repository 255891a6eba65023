/**
 * The log batcher: sends trajectory groups to `POST /v1/preview/models/{id}/log` in batches (by
 * count, bytes and time), with bounded memory, retries with backoff, and a spool file for what
 * cannot be delivered. Nothing is dropped silently: every group is either acknowledged by the
 * service or written to the spool and reported through `batch:spooled`.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'eventemitter3';
import { APIError } from '../client/errors.js';
import type { TrainingClient } from '../client/index.js';
import { type SerializedLogSender, serializedLogSender } from '../client/resources/models.js';
import { INITIAL_RETRY_DELAY_MS, retryDelay } from '../client/retry-delay.js';
import { type AbortScope, abortScope } from '../internal/abort-scope.js';
import { delay, raceSignal } from '../internal/delay.js';
import { isRetryableError, PolicyloopError, userAbortError } from '../internal/errors.js';
import { MAX_TIMER_MS } from '../internal/delay.js';
import { invalidOption, option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { TrajectoryGroupInput } from '../schema/index.js';
import { LogDeliveryError, LogFlushTimeoutError } from './errors.js';
import { appendSpoolRecords, releaseSpool, takeSpool } from './spool.js';

/** Options of {@link LogBatcher}. */
export interface LogBatcherOptions {
  /** Client of the training API. */
  client: TrainingClient;
  /** Id of the registered model the groups belong to. */
  modelId: string;
  /** File for batches that cannot be delivered (`<dataDir>/<project>/models/<name>/spool.jsonl`). */
  spoolPath: string;
  /**
   * Most groups in one request.
   * @default 64
   */
  maxBatchGroups?: number | undefined;
  /**
   * Most bytes of JSON in one request (a single larger group is sent alone).
   * @default 8_388_608 (8 MiB)
   */
  maxBatchBytes?: number | undefined;
  /**
   * Longest time a group waits in the buffer before it is sent, in milliseconds.
   * @default 1000
   */
  maxDelay?: number | undefined;
  /**
   * Most bytes buffered (including batches in flight); `add` waits while the buffer is full.
   * @default 67_108_864 (64 MiB)
   */
  maxBufferedBytes?: number | undefined;
  /**
   * Retries of a batch after its first attempt, on retryable errors (connection, timeout, 408, 409,
   * 429, 5xx), with exponential backoff that honours `Retry-After`.
   * @default 5
   */
  maxRetries?: number | undefined;
  /**
   * Wait before the first retry of a batch, in milliseconds; doubles with each further retry
   * (capped at 8 s, or at `retryDelay` when longer), less up to 25 % jitter.
   * @default 500
   */
  retryDelay?: number | undefined;
  /**
   * Time allowed for each request, in milliseconds.
   * @default 60_000
   */
  timeout?: number | undefined;
}

/** Options of {@link LogBatcher.flush} and {@link LogBatcher.close}. */
export interface FlushOptions {
  /**
   * Stops waiting: `flush` rejects with `APIUserAbortError` while delivery goes on in the
   * background; `close` writes what is not delivered yet to the spool at once, then rejects with it.
   */
  signal?: AbortSignal | undefined;
  /**
   * Time allowed, in milliseconds; then like `signal`, but rejecting with `LogFlushTimeoutError`.
   * @default Infinity (no limit: each request still has the batcher's `timeout`)
   */
  timeout?: number | undefined;
}

/** A batch the service acknowledged. */
export interface BatchSentEvent {
  /** The split of the batch. */
  readonly split: string;
  /** Groups in the batch. */
  readonly groupCount: number;
  /** Bytes of JSON of its groups. */
  readonly bytes: number;
  /** Attempts it took (1 = first try). */
  readonly attempts: number;
}

/** A batch failed and will be tried again after `delayMs`. */
export interface BatchRetryEvent {
  /** The split of the batch. */
  readonly split: string;
  /** Groups in the batch. */
  readonly groupCount: number;
  /**
   * Attempts made so far, the failed one included (1 = the first try failed): a count, as in
   * `batch:sent` and `batch:spooled`.
   */
  readonly attempts: number;
  /** Wait before the next attempt, in milliseconds. */
  readonly delayMs: number;
  /** Why the attempt failed. */
  readonly error: unknown;
}

/** A batch could not be delivered and was written to the spool file (replay it with `replaySpool`). */
export interface BatchSpooledEvent {
  /** The split of the batch. */
  readonly split: string;
  /** Groups in the batch. */
  readonly groupCount: number;
  /** The spool file it was appended to. */
  readonly spoolPath: string;
  /** Attempts made before spooling. */
  readonly attempts: number;
  /** The last error. */
  readonly error: unknown;
}

/** Events of {@link LogBatcher}. */
export interface LogBatcherEvents {
  /** The service acknowledged a batch. */
  'batch:sent': [event: BatchSentEvent];
  /** A batch failed and will be tried again. */
  'batch:retry': [event: BatchRetryEvent];
  /** A batch could not be delivered and went to the spool file. */
  'batch:spooled': [event: BatchSpooledEvent];
}

/** Counts since the batcher was created. */
export interface LogBatcherStats {
  /** Batches and groups the service acknowledged. */
  readonly sentBatches: number;
  /** Groups the service acknowledged. */
  readonly sentGroups: number;
  /** Batches and groups written to the spool file. */
  readonly spooledBatches: number;
  /** Groups written to the spool file. */
  readonly spooledGroups: number;
  /** Groups and bytes still buffered or in flight. */
  readonly bufferedGroups: number;
  /** Bytes of JSON still buffered or in flight. */
  readonly bufferedBytes: number;
  /** The spool file. */
  readonly spoolPath: string;
}

/** What {@link LogBatcher.replaySpool} did. */
export interface SpoolReplayResult {
  /** Batches and groups from the spool that the service now acknowledged. */
  readonly replayedBatches: number;
  /** Groups from the spool that the service now acknowledged. */
  readonly replayedGroups: number;
  /** Batches that failed again and are back in the spool. */
  readonly respooledBatches: number;
  /** Lines that could not be read (set aside in `<spool>.unreadable`). */
  readonly unreadableLines: number;
}

/** What {@link LogBatcher.add} queues. */
export interface LogBatcherAddParams {
  /** The split the groups belong to (`train`, `val`...), sent with them. */
  split: string;
  /** The trajectory groups to send. */
  groups: readonly TrajectoryGroupInput[];
}

/** Request options of {@link LogBatcher.add}. */
export interface LogBatcherAddOptions {
  /** Stops waiting for room in a full buffer (rejecting with `APIUserAbortError`). */
  signal?: AbortSignal | undefined;
}

/** The check of {@link LogBatcherOptions}, with the defaults. */
const LogBatcherOptionsSchema = optionsSchema<LogBatcherOptions>()({
  client: option.like<TrainingClient>((client) => typeof client?.models?.log === 'function', 'a TrainingClient'),
  modelId: option.nonEmptyString(),
  spoolPath: option.nonEmptyString(),
  maxBatchGroups: option.integer({ min: 1 }).default(64),
  maxBatchBytes: option.number({ min: 0, exclusiveMin: true }).default(8 * 1024 * 1024),
  maxDelay: option.number({ min: 0, max: MAX_TIMER_MS, unit: 'milliseconds' }).default(1_000),
  maxBufferedBytes: option.number({ min: 0, exclusiveMin: true }).default(64 * 1024 * 1024),
  maxRetries: option.retryCount().default(5),
  retryDelay: option.retryDelay().default(INITIAL_RETRY_DELAY_MS),
  timeout: option.timeout().default(60_000),
});

/** The check of {@link LogBatcherAddParams}. */
const AddParamsSchema = optionsSchema<LogBatcherAddParams>()({
  split: option.nonEmptyString(),
  groups: option.like<readonly TrajectoryGroupInput[]>(Array.isArray, 'an array of trajectory groups'),
});

/** The check of `replaySpool`'s options (and of {@link LogBatcherAddOptions}, the same `{ signal }`). */
const SignalOptionsSchema = optionsSchema<LogBatcherAddOptions>()({ signal: option.signal().optional() });

/** The check of {@link FlushOptions}. */
const FlushOptionsSchema = optionsSchema<FlushOptions>()({
  signal: option.signal().optional(),
  timeout: option.timeout({ allowInfinity: true }).optional(),
});

interface Entry {
  readonly split: string;
  readonly group: TrajectoryGroupInput;
  /** The group's JSON, serialized once when it was added: sent as is, on every attempt. */
  readonly json: string;
  readonly bytes: number;
}

/**
 * Batches log requests for one model.
 * @example
 * const batcher = new LogBatcher({ client, modelId: model.id, spoolPath: model.files.spool });
 * batcher.on('batch:spooled', (event) => console.warn(`${event.groupCount} groups spooled: ${event.error}`));
 * await batcher.add({ split: 'val', groups });
 * await batcher.close({ timeout: 30_000 });
 */
export class LogBatcher extends EventEmitter<LogBatcherEvents> {
  private readonly client: TrainingClient;
  /** Sends a batch's body as serialized once (undefined for a stand-in client: its `models.log` then). */
  private readonly sendSerialized: SerializedLogSender | undefined;
  private readonly modelId: string;
  private readonly spoolPath: string;
  private readonly maxBatchGroups: number;
  private readonly maxBatchBytes: number;
  private readonly maxDelay: number;
  private readonly maxBufferedBytes: number;
  private readonly maxRetries: number;
  private readonly retryDelay: number;
  private readonly timeout: number;

  private buffer: Entry[] = [];
  /** Bytes buffered plus bytes in flight: what memory the batcher holds. */
  private heldBytes = 0;
  private heldGroups = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The chain of drains: one batch in flight at a time, in order. */
  private tail: Promise<void> = Promise.resolve();
  private spaceWaiters: Array<() => void> = [];
  private closing = false;
  /** Aborted when `close`'s signal aborts or its timeout passes: pending batches then go straight to the spool. */
  private readonly stop = new AbortController();
  /** Batches neither sent nor spooled, and errors thrown by listeners: surfaced by the next flush or close. */
  private failures: Error[] = [];
  private counts = { sentBatches: 0, sentGroups: 0, spooledBatches: 0, spooledGroups: 0 };

  /** @throws {InvalidArgumentError} for a bad option, before anything is sent. */
  constructor(options: LogBatcherOptions) {
    super();
    const checked = parseOptions(LogBatcherOptionsSchema, options);
    this.client = checked.client;
    this.sendSerialized = serializedLogSender(checked.client.models);
    this.modelId = checked.modelId;
    this.spoolPath = checked.spoolPath;
    this.maxBatchGroups = checked.maxBatchGroups;
    this.maxBatchBytes = checked.maxBatchBytes;
    this.maxDelay = checked.maxDelay;
    this.maxBufferedBytes = checked.maxBufferedBytes;
    this.maxRetries = checked.maxRetries;
    this.retryDelay = checked.retryDelay;
    this.timeout = checked.timeout;
  }

  /**
   * Queues `params.groups` of `params.split` for sending. Resolves once they are buffered; waits
   * first while the buffer is full (backpressure); `options.signal` stops that wait (rejecting
   * with `APIUserAbortError`). A group larger than the whole buffer is accepted alone.
   * @example
   * await batcher.add({ split: 'val', groups }, { signal });
   */
  async add(params: LogBatcherAddParams, options?: LogBatcherAddOptions): Promise<void> {
    const { split, groups } = parseOptions(AddParamsSchema, params, { name: 'params' });
    const { signal } = parseOptions(SignalOptionsSchema, options, { prefixed: true });
    if (this.closing) throw new PolicyloopError('This LogBatcher is closed: it accepts no more groups.');
    for (const group of groups) {
      const json = JSON.stringify(group);
      if (json === undefined) throw invalidOption('groups', groups, 'an array of trajectory groups');
      const bytes = Buffer.byteLength(json, 'utf8');
      while (this.heldBytes > 0 && this.heldBytes + bytes > this.maxBufferedBytes) {
        void this.drain(true);
        try {
          await this.waitForSpace(signal);
        } catch (error) {
          throw signal?.aborted ? userAbortError(signal, 'Adding to the log batcher') : error;
        }
      }
      this.buffer.push({ split, group, json, bytes });
      this.heldBytes += bytes;
      this.heldGroups += 1;
    }
    if (this.nextBatchSize(false) > 0) void this.drain(false);
    else this.armTimer();
  }

  /**
   * Sends everything buffered and resolves when the service acknowledged it (or it was spooled).
   * `signal` and `timeout` stop the wait only (rejecting with `APIUserAbortError` or
   * `LogFlushTimeoutError`): the batches keep being delivered in the background.
   * Rejects with {@link LogDeliveryError} when a batch could be neither sent nor spooled, and with
   * the error of an event listener that threw (the batch itself is still delivered or spooled).
   * @example
   * const stats = await batcher.flush({ timeout: 30_000 });
   */
  async flush(options?: FlushOptions): Promise<LogBatcherStats> {
    const scope = this.scope(options, 'flush');
    try {
      await raceSignal(this.drain(true), scope.signal);
    } catch (error) {
      throw scope.signal.aborted ? scope.error() : error;
    } finally {
      scope.dispose();
    }
    this.throwFailures();
    return this.stats();
  }

  /**
   * Flushes and stops accepting groups. When `signal` aborts or `timeout` passes, the pending
   * batches are not tried again but written to the spool at once, so that closing is quick and
   * loses nothing; then it rejects with `APIUserAbortError` or `LogFlushTimeoutError`.
   * @example
   * await batcher.close({ timeout: 10_000 });
   */
  async close(options?: FlushOptions): Promise<LogBatcherStats> {
    const scope = this.scope(options, 'close');
    this.closing = true;
    const onStop = (): void => this.stop.abort(scope.signal.reason);
    if (scope.signal.aborted) onStop();
    else scope.signal.addEventListener('abort', onStop, { once: true });
    try {
      await this.drain(true);
    } finally {
      scope.dispose();
      scope.signal.removeEventListener('abort', onStop);
      for (const wake of this.spaceWaiters.splice(0)) wake();
    }
    this.throwFailures();
    if (scope.signal.aborted) throw scope.error();
    return this.stats();
  }

  /** Counts so far. */
  stats(): LogBatcherStats {
    return {
      ...this.counts,
      bufferedGroups: this.heldGroups,
      bufferedBytes: this.heldBytes,
      spoolPath: this.spoolPath,
    };
  }

  /**
   * Sends the batches a previous run spooled (for this model's spool file). Batches that fail
   * again go back to the spool. Runs after whatever is already queued.
   */
  async replaySpool(options?: { signal?: AbortSignal | undefined }): Promise<SpoolReplayResult> {
    const { signal } = parseOptions(SignalOptionsSchema, options, { prefixed: true });
    const run = this.tail.then(() => this.replay(signal));
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    const result = await run;
    this.throwFailures();
    // An aborted replay put what it did not send back in the spool; the call still says it was aborted.
    if (signal?.aborted) throw userAbortError(signal, 'The spool replay');
    return result;
  }

  /** Checks the options of flush/close and starts their abort scope. */
  private scope(value: FlushOptions | undefined, what: 'flush' | 'close'): AbortScope {
    const { signal, timeout } = checkFlushOptions(value);
    return abortScope({
      signal,
      timeout,
      what: `The log ${what}`,
      onTimeout: (ms) => new LogFlushTimeoutError(ms, what),
    });
  }

  private async replay(signal: AbortSignal | undefined): Promise<SpoolReplayResult> {
    const taken = await takeSpool(this.spoolPath);
    let replayedBatches = 0;
    let replayedGroups = 0;
    let respooledBatches = 0;
    for (const record of taken.records) {
      // JSON.stringify of a parsed JSON.stringify output gives the same text: the replay resends the
      // bytes of the first attempt, with its key (spools written before keys existed get a new one).
      const entries = record.trajectory_groups.map((group) => ({
        split: record.split,
        group,
        json: JSON.stringify(group),
        bytes: 0,
      }));
      const delivered = await this.deliver(entries, signal, record.idempotency_key);
      if (delivered) {
        replayedBatches += 1;
        replayedGroups += entries.length;
      } else {
        respooledBatches += 1;
      }
    }
    await releaseSpool(this.spoolPath, taken);
    return { replayedBatches, replayedGroups, respooledBatches, unreadableLines: taken.unreadableLines.length };
  }

  /** Queues a drain after the current one; `all` sends partial batches too. Never rejects. */
  private drain(all: boolean): Promise<void> {
    if (all) this.disarmTimer();
    const run = this.tail.then(async () => {
      for (;;) {
        const size = this.nextBatchSize(all);
        if (size === 0) break;
        const batch = this.buffer.splice(0, size);
        try {
          await this.deliver(batch, undefined);
        } finally {
          this.release(batch);
        }
      }
      if (this.buffer.length > 0) this.armTimer();
    });
    // A broken link must not stop later drains from running.
    this.tail = run.catch(() => undefined);
    return run;
  }

  /**
   * How many groups from the head of the buffer make the next batch: a run of one split, at most
   * `maxBatchGroups` and `maxBatchBytes`. 0 when the run is not complete yet and `all` is false.
   */
  private nextBatchSize(all: boolean): number {
    const head = this.buffer[0];
    if (head === undefined) return 0;
    let count = 0;
    let bytes = 0;
    let complete = false;
    for (const entry of this.buffer) {
      if (entry.split !== head.split || (count > 0 && bytes + entry.bytes > this.maxBatchBytes)) {
        complete = true;
        break;
      }
      count += 1;
      bytes += entry.bytes;
      if (count >= this.maxBatchGroups || bytes >= this.maxBatchBytes) {
        complete = true;
        break;
      }
    }
    return complete || all ? count : 0;
  }

  /**
   * Sends one batch with retries; spools it when that fails. True when the service acknowledged it.
   * Every attempt sends the same bytes with the same `Idempotency-Key` (`key`, or a new one), and a
   * spooled batch keeps its key, so a retry or replay of a batch the service already stored (its
   * answer lost on the way) stores nothing twice.
   */
  private async deliver(
    batch: readonly Entry[],
    signal: AbortSignal | undefined,
    key: string = randomUUID(),
  ): Promise<boolean> {
    const first = batch[0];
    if (first === undefined) return true;
    const split = first.split;
    const groups = batch.map((entry) => entry.group);
    const body = `{"split":${JSON.stringify(split)},"trajectory_groups":[${batch.map((entry) => entry.json).join(',')}]}`;
    const stop = signal === undefined ? this.stop.signal : AbortSignal.any([signal, this.stop.signal]);
    for (let attempt = 1; ; attempt += 1) {
      try {
        const options = { signal: stop, timeout: this.timeout, maxRetries: 0, idempotencyKey: key };
        if (this.sendSerialized !== undefined) await this.sendSerialized(this.modelId, body, options);
        else await this.client.models.log(this.modelId, { split, trajectory_groups: groups }, options);
        this.counts.sentBatches += 1;
        this.counts.sentGroups += groups.length;
        const bytes = batch.reduce((sum, entry) => sum + entry.bytes, 0);
        this.notify('batch:sent', { split, groupCount: groups.length, bytes, attempts: attempt });
        return true;
      } catch (error) {
        const retryable = isRetryableError(error);
        if (stop.aborted || !retryable || attempt > this.maxRetries) {
          await this.spool(split, groups, error, attempt, key);
          return false;
        }
        const delayMs = retryDelay(attempt, error instanceof APIError ? error.headers : undefined, this.retryDelay);
        this.notify('batch:retry', { split, groupCount: groups.length, attempts: attempt, delayMs, error });
        try {
          await delay(delayMs, stop);
        } catch {
          await this.spool(split, groups, error, attempt, key);
          return false;
        }
      }
    }
  }

  private async spool(
    split: string,
    groups: readonly TrajectoryGroupInput[],
    error: unknown,
    attempts: number,
    key: string,
  ): Promise<void> {
    try {
      await appendSpoolRecords(this.spoolPath, [
        {
          model_id: this.modelId,
          split,
          idempotency_key: key,
          trajectory_groups: groups,
          error: error instanceof Error ? error.message : String(error),
          attempts,
          spooled_at: new Date().toISOString(),
        },
      ]);
    } catch (spoolError) {
      this.failures.push(new LogDeliveryError(split, groups, this.spoolPath, spoolError));
      return;
    }
    this.counts.spooledBatches += 1;
    this.counts.spooledGroups += groups.length;
    this.notify('batch:spooled', { split, groupCount: groups.length, spoolPath: this.spoolPath, attempts, error });
  }

  /**
   * Emits an event; a listener that throws must not change the fate of a batch (a sent batch
   * spooled too would be sent twice by a replay), so its error is kept for the next flush/close.
   */
  private notify<K extends keyof LogBatcherEvents>(name: K, event: LogBatcherEvents[K][0]): void {
    try {
      (this.emit as (name: K, event: unknown) => boolean)(name, event);
    } catch (error) {
      this.failures.push(
        new PolicyloopError(
          `A \`${name}\` listener of the LogBatcher threw: ${error instanceof Error ? error.message : String(error)}`,
          {
            cause: error,
          },
        ),
      );
    }
  }

  private release(batch: readonly Entry[]): void {
    for (const entry of batch) this.heldBytes -= entry.bytes;
    this.heldGroups -= batch.length;
    for (const wake of this.spaceWaiters.splice(0)) wake();
  }

  private waitForSpace(signal: AbortSignal | undefined): Promise<void> {
    if (this.closing)
      return Promise.reject(new PolicyloopError('This LogBatcher closed while `add` waited for space.'));
    return raceSignal(new Promise<void>((resolve) => this.spaceWaiters.push(resolve)), signal);
  }

  private armTimer(): void {
    if (this.timer !== undefined || this.buffer.length === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.drain(true);
    }, this.maxDelay);
  }

  private disarmTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private throwFailures(): void {
    const failure = this.failures.shift();
    if (failure !== undefined) throw failure;
  }
}

/**
 * Checks the options of a flush or close (a bad or unknown key throws `InvalidArgumentError`
 * naming `options.<name>`).
 */
export function checkFlushOptions(value: FlushOptions | undefined): FlushOptions {
  return parseOptions(FlushOptionsSchema, value, { prefixed: true });
}
