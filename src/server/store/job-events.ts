/** The `job_events` table: each training job's events in order, and who waits for the next one. */
import { randomUUID } from 'node:crypto';
import type { TrainingJobEventType } from '../../schema/index.js';
import type { StoreConnection, StorePage } from './connection.js';

/** A job event as the API shows it. */
export interface EventRecord {
  readonly id: string;
  readonly type: TrainingJobEventType;
  readonly data: Record<string, unknown>;
}

/** The jobs' events. They are appended by `JobStore` as the job's state changes with them. */
export class JobEventStore {
  private readonly listeners = new Map<string, Set<() => void>>();

  /** @param connection The store's connection. */
  constructor(private readonly connection: StoreConnection) {}

  /**
   * Appends an event of job `jobId` and calls the listeners waiting for one (see {@link onEvent}).
   * The caller's transaction holds the change of the job's state that goes with it.
   */
  append(jobId: string, type: TrainingJobEventType, data: Record<string, unknown>, time: string): void {
    this.connection
      .prepare('INSERT INTO job_events (id, job_id, type, data, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(randomUUID(), jobId, type, JSON.stringify(data), time);
    for (const listener of this.listeners.get(jobId) ?? []) listener();
  }

  /** A page of a job's events in order; undefined when `after` is not an event of this job. */
  list(jobId: string, query: { after?: string | undefined; limit: number }): StorePage<EventRecord> | undefined {
    let from = 0;
    if (query.after !== undefined) {
      const cursor = this.connection
        .prepare('SELECT sequence FROM job_events WHERE job_id = ? AND id = ?')
        .get(jobId, query.after) as { sequence: number } | undefined;
      if (cursor === undefined) return undefined;
      from = cursor.sequence;
    }
    const rows = this.connection
      .prepare('SELECT id, type, data FROM job_events WHERE job_id = ? AND sequence > ? ORDER BY sequence LIMIT ?')
      .all(jobId, from, query.limit + 1) as { id: string; type: TrainingJobEventType; data: string }[];
    const items = rows
      .slice(0, query.limit)
      .map((row) => ({ id: row.id, type: row.type, data: JSON.parse(row.data) as Record<string, unknown> }));
    return { items, hasMore: rows.length > query.limit };
  }

  /**
   * Calls `listener` after each event recorded for job `jobId` from now on (inside the recording
   * call: defer work to a promise). Returns the function that stops it. Long-polled event lists
   * wait on it.
   */
  onEvent(jobId: string, listener: () => void): () => void {
    let listeners = this.listeners.get(jobId);
    if (listeners === undefined) {
      listeners = new Set();
      this.listeners.set(jobId, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.listeners.get(jobId) === listeners) this.listeners.delete(jobId);
    };
  }
}
