/** The `models` table: registered models and the step each has reached. */
import { randomUUID } from 'node:crypto';
import type { CheckpointRecord, CheckpointStore } from './checkpoints.js';
import { now, type StoreConnection, type StorePage } from './connection.js';

/** A registered model row. */
export interface ModelRecord {
  readonly id: string;
  readonly entity: string;
  readonly project: string;
  readonly name: string;
  readonly base_model: string;
  /** Step of the newest checkpoint ever made (0 = base); the next job makes `latest_step + 1`. */
  readonly latest_step: number;
  readonly created_at: string;
}

/** The registered models. */
export class ModelStore {
  /**
   * @param connection The store's connection.
   * @param checkpoints The checkpoints, which a model's deletion returns.
   */
  constructor(
    private readonly connection: StoreConnection,
    private readonly checkpoints: CheckpointStore,
  ) {}

  /** Inserts a model; the caller has checked that the name is free. */
  create(fields: { entity: string; project: string; name: string; base_model: string }): ModelRecord {
    const record: ModelRecord = { id: randomUUID(), ...fields, latest_step: 0, created_at: now() };
    this.connection
      .prepare(
        'INSERT INTO models (id, entity, project, name, base_model, latest_step, created_at) VALUES (@id, @entity, @project, @name, @base_model, @latest_step, @created_at)',
      )
      .run(record);
    return record;
  }

  /** A model by id. */
  get(id: string): ModelRecord | undefined {
    return this.connection.prepare('SELECT * FROM models WHERE id = ?').get(id) as ModelRecord | undefined;
  }

  /** A model by its unique name. */
  find(entity: string, project: string, name: string): ModelRecord | undefined {
    return this.connection
      .prepare('SELECT * FROM models WHERE entity = ? AND project = ? AND name = ?')
      .get(entity, project, name) as ModelRecord | undefined;
  }

  /** Models whose project and name match, in any entity (for short inference names). */
  findByProjectAndName(project: string, name: string): ModelRecord[] {
    return this.connection
      .prepare('SELECT * FROM models WHERE project = ? AND name = ? ORDER BY created_at')
      .all(project, name) as ModelRecord[];
  }

  /** Models with this name, in any entity and project (for the shortest inference names). */
  findByName(name: string): ModelRecord[] {
    return this.connection
      .prepare('SELECT * FROM models WHERE name = ? ORDER BY created_at')
      .all(name) as ModelRecord[];
  }

  /** Every model, oldest first. */
  all(): ModelRecord[] {
    return this.connection.prepare('SELECT * FROM models ORDER BY created_at, id').all() as ModelRecord[];
  }

  /** A page of registered models, newest first; undefined when `after` is not a model id. */
  list(query: {
    after?: string | undefined;
    limit: number;
    entity?: string | undefined;
    project?: string | undefined;
    name?: string | undefined;
  }): StorePage<ModelRecord> | undefined {
    const filters: string[] = [];
    const parameters: Record<string, string | number> = { limit: query.limit + 1 };
    for (const field of ['entity', 'project', 'name'] as const) {
      const value = query[field];
      if (value === undefined) continue;
      filters.push(`${field} = @${field}`);
      parameters[field] = value;
    }
    if (query.after !== undefined) {
      const cursor = this.connection.prepare('SELECT rowid FROM models WHERE id = ?').get(query.after) as
        | { rowid: number }
        | undefined;
      if (cursor === undefined) return undefined;
      filters.push('rowid < @cursor');
      parameters['cursor'] = cursor.rowid;
    }
    const where = filters.length === 0 ? '' : `WHERE ${filters.join(' AND ')}`;
    const rows = this.connection
      .prepare(`SELECT * FROM models ${where} ORDER BY rowid DESC LIMIT @limit`)
      .all(parameters) as ModelRecord[];
    return { items: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
  }

  /** Raises the model's `latest_step` to `step` (never lowers it). */
  advanceLatestStep(id: string, step: number): void {
    this.connection.prepare('UPDATE models SET latest_step = MAX(latest_step, ?) WHERE id = ?').run(step, id);
  }

  /**
   * Deletes a model with its checkpoints, jobs, events, logged groups and metrics (one transaction;
   * the schema's foreign keys cascade). Returns the deleted checkpoint rows (so their files can go
   * too), or undefined when unknown.
   */
  delete(id: string): CheckpointRecord[] | undefined {
    return this.connection.transaction(() => {
      if (this.get(id) === undefined) return undefined;
      const checkpoints = this.checkpoints.all(id);
      this.connection.prepare('DELETE FROM models WHERE id = ?').run(id);
      return checkpoints;
    });
  }
}
