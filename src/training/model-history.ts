/**
 * A trained model's metric history: rows appended to `history.jsonl` and, where the service keeps
 * history (the local service's `/v1/local/` routes), sent there too and read back from there.
 */
import { randomUUID } from 'node:crypto';
import { APIError, NotFoundError } from '../client/errors.js';
import { isRetryableError, PolicyloopError } from '../internal/errors.js';
import type { BackendConnection, WaitOptions } from './backend.js';
import {
  appendHistoryRow,
  compareHistories,
  historyRowsFromService,
  readHistory,
  toStepMetricsBodies,
} from './history.js';
import type { HistoryRow, ServiceStepMetrics, StepMetricsBody } from './history.js';
import type { HistoryErrorEvent, HistoryMismatchEvent, HistoryRowEvent } from './model-events.js';
import type { ModelFiles } from './model-files.js';

/** The registered model a history belongs to. */
export interface HistoryTarget {
  readonly connection: BackendConnection;
  readonly modelId: string;
  readonly files: ModelFiles;
}

/** Where a history reports what happened (the model's events). */
export interface HistoryEvents {
  row(event: HistoryRowEvent): void;
  error(event: HistoryErrorEvent): void;
  mismatch(event: HistoryMismatchEvent): void;
}

/** Metrics waiting to reach the local service's metrics route. */
interface PendingMetrics {
  readonly modelId: string;
  readonly body: StepMetricsBody;
  /** Kept across attempts: the service answers a repeat from the first write. */
  readonly idempotencyKey: string;
}

/** The history of one trained model, across its registrations. */
export class ModelHistory {
  /** Whether the service answers `/v1/local/` (undefined: not asked yet). */
  private localRoutes: boolean | undefined;
  private pendingMetrics: PendingMetrics[] = [];
  private sendingMetrics: Promise<void> = Promise.resolve();
  private readonly target: () => HistoryTarget | undefined;
  private readonly events: HistoryEvents;

  /** A history of the model `target` names (undefined once it is deleted). */
  constructor(target: () => HistoryTarget | undefined, events: HistoryEvents) {
    this.target = target;
    this.events = events;
  }

  /** A new registration: what its connection says about the local routes (undefined: ask). */
  registered(localRoutes: boolean | undefined): void {
    this.localRoutes = localRoutes;
  }

  /**
   * The one place a history row is recorded: appended to `history.jsonl` (the record kept for
   * the hosted service, and what `history:row` reports), then, when the service has the local
   * routes, sent to `POST /v1/local/models/{id}/metrics` (one body per split, unprefixed names,
   * with an idempotency key so the client retries it safely). A send that still fails never
   * fails the caller: it emits `history:error` and stays queued for the next row, `read()` and
   * `flush()`.
   */
  async record(metrics: Readonly<Record<string, number>>, step: number): Promise<HistoryRow> {
    const { modelId, files } = this.required();
    const row = await appendHistoryRow(files.history, metrics, step);
    this.events.row({ row, path: files.history });
    if (await this.hasLocalRoutes()) {
      for (const body of toStepMetricsBodies(metrics, step))
        this.pendingMetrics.push({ modelId, body, idempotencyKey: randomUUID() });
      await this.flush();
    }
    return row;
  }

  /**
   * The rows: the service's where it keeps history (emitting `history:mismatch` when
   * `history.jsonl` disagrees), else the file's.
   */
  async read(options: WaitOptions = {}): Promise<HistoryRow[]> {
    const { connection, modelId, files } = this.required();
    const fileRows = await readHistory(files.history);
    if (!(await this.hasLocalRoutes(options))) return fileRows;
    await this.flush();
    const items: ServiceStepMetrics[] = [];
    for await (const item of connection.client.local.metrics.list(modelId, { limit: 100 }, { signal: options.signal }))
      items.push(item);
    const rows = historyRowsFromService(items);
    const difference = compareHistories(rows, fileRows);
    if (difference !== null) this.events.mismatch({ ...difference, path: files.history });
    return rows;
  }

  /** Sends the queued metrics in order, one sender at a time; stops at the first failure. */
  flush(): Promise<void> {
    this.sendingMetrics = this.sendingMetrics.then(async () => {
      const connection = this.target()?.connection;
      // A deleted model's metrics have nowhere to go.
      if (connection === undefined) this.pendingMetrics = [];
      while (connection !== undefined && this.pendingMetrics.length > 0) {
        const next = this.pendingMetrics[0] as PendingMetrics;
        try {
          await connection.client.local.metrics.create(next.modelId, next.body, {
            idempotencyKey: next.idempotencyKey,
          });
          this.pendingMetrics.shift();
        } catch (error) {
          // A refusal (a 4xx the retry rule does not retry) will not change on a retry: drop it, loudly.
          const permanent = error instanceof APIError && error.status >= 400 && !isRetryableError(error);
          if (permanent) this.pendingMetrics.shift();
          const { step, split } = next.body;
          this.events.error({ error, step, split, dropped: permanent, pending: this.pendingMetrics.length });
          if (!permanent) return;
        }
      }
    });
    return this.sendingMetrics;
  }

  /**
   * Whether the service answers `/v1/local/`: the connection says so, or (a backend that does
   * not) one `GET /v1/local/models/{id}` tells, a 404 meaning no. Another failure answers no for
   * now and asks again next time.
   */
  private async hasLocalRoutes(options: WaitOptions = {}): Promise<boolean> {
    if (this.localRoutes !== undefined) return this.localRoutes;
    const { connection, modelId } = this.required();
    try {
      await connection.client.local.models.retrieve(modelId, { signal: options.signal });
      this.localRoutes = true;
    } catch (error) {
      if (error instanceof NotFoundError) this.localRoutes = false;
      else if (options.signal?.aborted === true) throw error;
      return false;
    }
    return true;
  }

  private required(): HistoryTarget {
    const target = this.target();
    if (target === undefined)
      throw new PolicyloopError('The model is not registered: call `await model.register(backend)` first.');
    return target;
  }
}
