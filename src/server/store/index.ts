/**
 * The local service's durable state in one SQLite file (`<dataDir>/policyloop.db`), one module per
 * resource over one connection and its one transaction helper (`connection.ts`):
 *
 * - `models.ts`: registered models;
 * - `checkpoints.ts`: their checkpoints;
 * - `jobs.ts` and `job-events.ts`: training jobs and their events;
 * - `logs.ts` and `step-metrics.ts`: logged trajectory groups and step metrics;
 * - `idempotency-keys.ts`: the stored answers to `Idempotency-Key`s.
 *
 * A write that spans resources (a job's completion, a log with its metrics, a write with its
 * key's answer) runs in one transaction: a module's transaction inside another's joins it.
 */
import { CheckpointStore } from './checkpoints.js';
import { StoreConnection } from './connection.js';
import { IdempotencyKeyStore } from './idempotency-keys.js';
import { JobEventStore } from './job-events.js';
import { JobStore } from './jobs.js';
import { LogStore } from './logs.js';
import { ModelStore } from './models.js';
import { StepMetricStore } from './step-metrics.js';

export type { CheckpointRecord, CheckpointStore } from './checkpoints.js';
export { DATABASE_FILE, type StorePage } from './connection.js';
export type { IdempotencyKeyStore, IdempotencyRecord } from './idempotency-keys.js';
export type { EventRecord, JobEventStore } from './job-events.js';
export type { JobKind, JobRecord, JobStore } from './jobs.js';
export type { LogEntry, LogStore, TrajectoryGroupRecord } from './logs.js';
export type { ModelRecord, ModelStore } from './models.js';
export type { StepMetricsRecord, StepMetricStore } from './step-metrics.js';

/** The store: each resource's module over the one connection. */
export class Store {
  /** Registered models. */
  readonly models: ModelStore;
  /** The models' checkpoints. */
  readonly checkpoints: CheckpointStore;
  /** Training jobs and their states. */
  readonly jobs: JobStore;
  /** The jobs' events, and waiting for the next one. */
  readonly jobEvents: JobEventStore;
  /** Logged trajectory groups (the log write stores their step's metrics with them). */
  readonly logs: LogStore;
  /** Metrics per model, step and split. */
  readonly stepMetrics: StepMetricStore;
  /** Stored answers to `Idempotency-Key`s. */
  readonly idempotencyKeys: IdempotencyKeyStore;

  private constructor(private readonly connection: StoreConnection) {
    this.checkpoints = new CheckpointStore(connection);
    this.models = new ModelStore(connection, this.checkpoints);
    this.jobEvents = new JobEventStore(connection);
    this.jobs = new JobStore(connection, {
      models: this.models,
      checkpoints: this.checkpoints,
      events: this.jobEvents,
    });
    this.stepMetrics = new StepMetricStore(connection);
    this.logs = new LogStore(connection, this.stepMetrics);
    this.idempotencyKeys = new IdempotencyKeyStore(connection);
  }

  /** Opens (creating when needed) the store in `dataDir` and brings its schema up to date. */
  static openIn(dataDir: string): Store {
    return new Store(StoreConnection.openIn(dataDir));
  }

  /** True until {@link close}. */
  get isOpen(): boolean {
    return this.connection.isOpen;
  }

  /** Closes the database; later calls throw. */
  close(): void {
    this.connection.close();
  }

  /** A cheap round trip that proves the database answers (for the system check). */
  ping(): void {
    this.connection.prepare('SELECT COUNT(*) AS count FROM models').get();
  }

  /**
   * Runs `work` in one transaction: all of its writes are stored, or none (it throws). Store
   * calls inside it that open their own transaction become part of this one.
   */
  transaction<T>(work: () => T): T {
    return this.connection.transaction(work);
  }
}
