/** The `checkpoints` table: the weights of each model at each step a job finished. */
import { randomUUID } from 'node:crypto';
import type { StoreConnection, StorePage } from './connection.js';

/** A checkpoint row; `path` is relative to the data directory. */
export interface CheckpointRecord {
  readonly id: string;
  readonly model_id: string;
  readonly step: number;
  readonly metrics: Record<string, number>;
  readonly path: string;
  readonly created_at: string;
}

interface CheckpointRow {
  id: string;
  model_id: string;
  step: number;
  metrics: string;
  path: string;
  created_at: string;
}

/** The models' checkpoints, one per model and step. */
export class CheckpointStore {
  /** @param connection The store's connection. */
  constructor(private readonly connection: StoreConnection) {}

  /** All checkpoints of a model by step ascending. */
  all(modelId: string): CheckpointRecord[] {
    const rows = this.connection
      .prepare('SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step')
      .all(modelId) as CheckpointRow[];
    return rows.map(toCheckpoint);
  }

  /** The checkpoint of a model at a step. */
  get(modelId: string, step: number): CheckpointRecord | undefined {
    const row = this.connection
      .prepare('SELECT * FROM checkpoints WHERE model_id = ? AND step = ?')
      .get(modelId, step) as CheckpointRow | undefined;
    return row === undefined ? undefined : toCheckpoint(row);
  }

  /** The newest existing checkpoint of a model (undefined = only the base weights). */
  newest(modelId: string): CheckpointRecord | undefined {
    const row = this.connection
      .prepare('SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step DESC LIMIT 1')
      .get(modelId) as CheckpointRow | undefined;
    return row === undefined ? undefined : toCheckpoint(row);
  }

  /** A page of checkpoints by step; undefined when `after` is not a checkpoint of this model. */
  list(
    modelId: string,
    query: { after?: string | undefined; limit: number; order: 'asc' | 'desc' },
  ): StorePage<CheckpointRecord> | undefined {
    const comparison = query.order === 'asc' ? '>' : '<';
    const direction = query.order === 'asc' ? 'ASC' : 'DESC';
    let rows: CheckpointRow[];
    if (query.after === undefined) {
      rows = this.connection
        .prepare(`SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step ${direction} LIMIT ?`)
        .all(modelId, query.limit + 1) as CheckpointRow[];
    } else {
      const cursor = this.connection
        .prepare('SELECT step FROM checkpoints WHERE model_id = ? AND id = ?')
        .get(modelId, query.after) as { step: number } | undefined;
      if (cursor === undefined) return undefined;
      rows = this.connection
        .prepare(
          `SELECT * FROM checkpoints WHERE model_id = ? AND step ${comparison} ? ORDER BY step ${direction} LIMIT ?`,
        )
        .all(modelId, cursor.step, query.limit + 1) as CheckpointRow[];
    }
    return { items: rows.slice(0, query.limit).map(toCheckpoint), hasMore: rows.length > query.limit };
  }

  /**
   * Stores the checkpoint of a model at a step, replacing one already there (a step made again
   * after its checkpoint was deleted). Part of a job's completion: see `JobStore.complete`.
   */
  put(
    modelId: string,
    checkpoint: { step: number; metrics: Record<string, number>; path: string },
    time: string,
  ): void {
    this.connection.prepare('DELETE FROM checkpoints WHERE model_id = ? AND step = ?').run(modelId, checkpoint.step);
    this.connection
      .prepare('INSERT INTO checkpoints (id, model_id, step, metrics, path, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(randomUUID(), modelId, checkpoint.step, JSON.stringify(checkpoint.metrics), checkpoint.path, time);
  }

  /** Deletes the checkpoints at `steps`; returns the deleted rows and the steps that had none. */
  delete(modelId: string, steps: readonly number[]): { deleted: CheckpointRecord[]; notFound: number[] } {
    return this.connection.transaction(() => {
      const deleted: CheckpointRecord[] = [];
      const notFound: number[] = [];
      const seen = new Set<number>();
      for (const step of steps) {
        if (seen.has(step)) continue;
        seen.add(step);
        const checkpoint = this.get(modelId, step);
        if (checkpoint === undefined) {
          notFound.push(step);
          continue;
        }
        this.connection.prepare('DELETE FROM checkpoints WHERE id = ?').run(checkpoint.id);
        deleted.push(checkpoint);
      }
      return { deleted, notFound };
    });
  }
}

function toCheckpoint(row: CheckpointRow): CheckpointRecord {
  return { ...row, metrics: JSON.parse(row.metrics) as Record<string, number> };
}
