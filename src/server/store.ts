/**
 * The local service's durable state: models, checkpoints, jobs, job events, logged trajectory
 * groups and step metrics in one SQLite file (`<dataDir>/policyloop.db`). WAL with
 * `synchronous=FULL`, so a write acknowledged to a client survives `kill -9` of the process.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { TrainingJobEventType, TrainingJobStatus } from '../schema/index.js';
import { fastParseTrajectoryGroup } from '../schema/fast-parse.js';
import { mergeStepStatistics, type StepStatistics } from '../schema/metrics.js';
import { TrajectoryGroup } from '../schema/index.js';
import { MIGRATIONS } from './migrations.js';
import { openDatabase, type SqliteDatabase } from './sqlite.js';

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

/** A checkpoint row; `path` is relative to the data directory. */
export interface CheckpointRecord {
  readonly id: string;
  readonly model_id: string;
  readonly step: number;
  readonly metrics: Record<string, number>;
  readonly path: string;
  readonly created_at: string;
}

/** Kind of a training job. */
export type JobKind = 'rl' | 'sft';

/** A training job row. `request` is the validated request body, as JSON. */
export interface JobRecord {
  readonly id: string;
  readonly model_id: string;
  readonly kind: JobKind;
  readonly status: TrainingJobStatus;
  readonly progress: number | null;
  readonly num_sequences: number | null;
  readonly steps_done: number;
  readonly error_message: string | null;
  readonly request: string;
  readonly output_path: string | null;
  readonly training_start: string | null;
  readonly training_end: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

/** A job event as the API shows it. */
export interface EventRecord {
  readonly id: string;
  readonly type: TrainingJobEventType;
  readonly data: Record<string, unknown>;
}

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

/** One page of items and whether more follow. `undefined` from a list call means an unknown cursor. */
export interface StorePage<T> {
  readonly items: T[];
  readonly hasMore: boolean;
}

/** The metrics of one step and split, merged from its rows in the order they were recorded (later keys win). */
export interface StepMetricsRecord {
  readonly step: number;
  readonly split: string;
  readonly metrics: Record<string, number>;
  /** When the newest merged row was recorded. */
  readonly updated_at: string;
}

/** A logged trajectory group; `id` is its sequence number as a string. */
export interface TrajectoryGroupRecord {
  readonly id: string;
  readonly step: number;
  readonly split: string;
  readonly created_at: string;
  /** The group as the log route validated it. */
  readonly group: unknown;
}

interface CheckpointRow {
  id: string;
  model_id: string;
  step: number;
  metrics: string;
  path: string;
  created_at: string;
}

/** Name of the database file inside the data directory. */
export const DATABASE_FILE = 'policyloop.db';

function now(): string {
  return new Date().toISOString();
}

/**
 * The SQLite store (through `./sqlite.ts`: `node:sqlite` where the runtime has it, else
 * better-sqlite3). All calls are synchronous and therefore never interleave.
 */
export class Store {
  private readonly db: SqliteDatabase;
  private open = true;
  private readonly eventListeners = new Map<string, Set<() => void>>();

  private constructor(db: SqliteDatabase) {
    this.db = db;
  }

  /** Opens (creating when needed) the store in `dataDir` and brings its schema up to date. */
  static openIn(dataDir: string): Store {
    mkdirSync(dataDir, { recursive: true });
    const db = openDatabase(join(dataDir, DATABASE_FILE));
    try {
      db.exec('PRAGMA journal_mode = WAL');
      // FULL: every commit is fsynced, so a 200 answer means the write is on disk.
      db.exec('PRAGMA synchronous = FULL');
      db.exec('PRAGMA foreign_keys = ON');
      db.exec('PRAGMA busy_timeout = 5000');
      migrate(db);
    } catch (error) {
      db.close();
      throw error;
    }
    return new Store(db);
  }

  /** True until {@link close}. */
  get isOpen(): boolean {
    return this.open;
  }

  /** Closes the database; later calls throw. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.db.close();
  }

  /** A cheap round trip that proves the database answers (for the system check). */
  ping(): void {
    this.db.prepare('SELECT COUNT(*) AS count FROM models').get();
  }

  // ---- models ----

  /** Inserts a model; the caller has checked that the name is free. */
  createModel(fields: { entity: string; project: string; name: string; base_model: string }): ModelRecord {
    const record: ModelRecord = { id: randomUUID(), ...fields, latest_step: 0, created_at: now() };
    this.db
      .prepare(
        'INSERT INTO models (id, entity, project, name, base_model, latest_step, created_at) VALUES (@id, @entity, @project, @name, @base_model, @latest_step, @created_at)',
      )
      .run(record);
    return record;
  }

  /** A model by id. */
  getModel(id: string): ModelRecord | undefined {
    return this.db.prepare('SELECT * FROM models WHERE id = ?').get(id) as ModelRecord | undefined;
  }

  /** A model by its unique name. */
  findModel(entity: string, project: string, name: string): ModelRecord | undefined {
    return this.db
      .prepare('SELECT * FROM models WHERE entity = ? AND project = ? AND name = ?')
      .get(entity, project, name) as ModelRecord | undefined;
  }

  /** Models whose project and name match, in any entity (for short inference names). */
  findModelsByProjectAndName(project: string, name: string): ModelRecord[] {
    return this.db
      .prepare('SELECT * FROM models WHERE project = ? AND name = ? ORDER BY created_at')
      .all(project, name) as ModelRecord[];
  }

  /** Models with this name, in any entity and project (for the shortest inference names). */
  findModelsByName(name: string): ModelRecord[] {
    return this.db.prepare('SELECT * FROM models WHERE name = ? ORDER BY created_at').all(name) as ModelRecord[];
  }

  /** Every model, oldest first. */
  listModels(): ModelRecord[] {
    return this.db.prepare('SELECT * FROM models ORDER BY created_at, id').all() as ModelRecord[];
  }

  /**
   * Deletes a model with its checkpoints, jobs, events, logged groups and metrics (one transaction).
   * Returns the deleted checkpoint rows (so their files can go too), or undefined when unknown.
   */
  deleteModel(id: string): CheckpointRecord[] | undefined {
    return this.db.transaction(() => {
      if (this.getModel(id) === undefined) return undefined;
      const checkpoints = this.allCheckpoints(id);
      this.db.prepare('DELETE FROM models WHERE id = ?').run(id);
      return checkpoints;
    })();
  }

  // ---- checkpoints ----

  /** All checkpoints of a model by step ascending. */
  allCheckpoints(modelId: string): CheckpointRecord[] {
    const rows = this.db
      .prepare('SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step')
      .all(modelId) as CheckpointRow[];
    return rows.map(toCheckpoint);
  }

  /** The checkpoint of a model at a step. */
  getCheckpoint(modelId: string, step: number): CheckpointRecord | undefined {
    const row = this.db.prepare('SELECT * FROM checkpoints WHERE model_id = ? AND step = ?').get(modelId, step) as
      | CheckpointRow
      | undefined;
    return row === undefined ? undefined : toCheckpoint(row);
  }

  /** The newest existing checkpoint of a model (undefined = only the base weights). */
  newestCheckpoint(modelId: string): CheckpointRecord | undefined {
    const row = this.db
      .prepare('SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step DESC LIMIT 1')
      .get(modelId) as CheckpointRow | undefined;
    return row === undefined ? undefined : toCheckpoint(row);
  }

  /** A page of checkpoints by step; undefined when `after` is not a checkpoint of this model. */
  listCheckpoints(
    modelId: string,
    query: { after?: string | undefined; limit: number; order: 'asc' | 'desc' },
  ): StorePage<CheckpointRecord> | undefined {
    const comparison = query.order === 'asc' ? '>' : '<';
    const direction = query.order === 'asc' ? 'ASC' : 'DESC';
    let rows: CheckpointRow[];
    if (query.after === undefined) {
      rows = this.db
        .prepare(`SELECT * FROM checkpoints WHERE model_id = ? ORDER BY step ${direction} LIMIT ?`)
        .all(modelId, query.limit + 1) as CheckpointRow[];
    } else {
      const cursor = this.db
        .prepare('SELECT step FROM checkpoints WHERE model_id = ? AND id = ?')
        .get(modelId, query.after) as { step: number } | undefined;
      if (cursor === undefined) return undefined;
      rows = this.db
        .prepare(
          `SELECT * FROM checkpoints WHERE model_id = ? AND step ${comparison} ? ORDER BY step ${direction} LIMIT ?`,
        )
        .all(modelId, cursor.step, query.limit + 1) as CheckpointRow[];
    }
    return { items: rows.slice(0, query.limit).map(toCheckpoint), hasMore: rows.length > query.limit };
  }

  /** Deletes the checkpoints at `steps`; returns the deleted rows and the steps that had none. */
  deleteCheckpoints(modelId: string, steps: readonly number[]): { deleted: CheckpointRecord[]; notFound: number[] } {
    return this.db.transaction(() => {
      const deleted: CheckpointRecord[] = [];
      const notFound: number[] = [];
      const seen = new Set<number>();
      for (const step of steps) {
        if (seen.has(step)) continue;
        seen.add(step);
        const checkpoint = this.getCheckpoint(modelId, step);
        if (checkpoint === undefined) {
          notFound.push(step);
          continue;
        }
        this.db.prepare('DELETE FROM checkpoints WHERE id = ?').run(checkpoint.id);
        deleted.push(checkpoint);
      }
      return { deleted, notFound };
    })();
  }

  // ---- logs ----

  /**
   * Stores logged groups (one row each) and the step's metrics, atomically. The metrics row is
   * merged with the step and split's earlier log rows (means weighted, counts added), so that a log
   * sent in several requests (the client batches) gives the metrics of all its groups.
   */
  insertLog(entry: {
    modelId: string;
    split: string;
    step: number;
    groups: readonly unknown[];
    /** Each group's JSON as received, stored instead of serializing `groups` again (same order). */
    groupTexts?: readonly string[] | undefined;
    statistics: StepStatistics;
  }): void {
    this.db.transaction(() => {
      const createdAt = now();
      const insertGroup = this.db.prepare(
        'INSERT INTO trajectory_groups (model_id, split, step, data, created_at) VALUES (?, ?, ?, ?, ?)',
      );
      const texts = entry.groupTexts;
      entry.groups.forEach((group, index) => {
        const data = texts?.[index] ?? JSON.stringify(group);
        insertGroup.run(entry.modelId, entry.split, entry.step, data, createdAt);
      });
      const earlier = this.db
        .prepare(
          'SELECT metrics, weights FROM step_metrics WHERE model_id = ? AND step = ? AND split = ? AND weights IS NOT NULL ORDER BY sequence DESC LIMIT 1',
        )
        .get(entry.modelId, entry.step, entry.split) as { metrics: string; weights: string } | undefined;
      const merged =
        earlier === undefined
          ? entry.statistics
          : mergeStepStatistics(
              { metrics: JSON.parse(earlier.metrics), weights: JSON.parse(earlier.weights) },
              entry.statistics,
            );
      this.db
        .prepare(
          'INSERT INTO step_metrics (model_id, split, step, metrics, weights, created_at) VALUES (?, ?, ?, ?, ?, ?)',
        )
        .run(
          entry.modelId,
          entry.split,
          entry.step,
          JSON.stringify(merged.metrics),
          JSON.stringify(merged.weights),
          createdAt,
        );
    })();
  }

  // ---- transactions and idempotency keys ----

  /**
   * Runs `work` in one transaction: all of its writes are stored, or none (it throws). Store
   * calls inside it that open their own transaction become part of this one.
   */
  transaction<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  /** The answer stored for `key` of `principal`, unless it was created before `notBefore`. */
  findIdempotencyRecord(principal: string, key: string, notBefore: string): IdempotencyRecord | undefined {
    return this.db
      .prepare('SELECT * FROM idempotency_keys WHERE principal = ? AND key = ? AND created_at >= ?')
      .get(principal, key, notBefore) as IdempotencyRecord | undefined;
  }

  /** Stores the answer to a key, replacing an expired one not yet pruned. */
  saveIdempotencyRecord(record: IdempotencyRecord): void {
    this.db
      .prepare(
        `INSERT OR REPLACE INTO idempotency_keys (principal, key, request_hash, method, path, status, response_body, created_at)
         VALUES (@principal, @key, @request_hash, @method, @path, @status, @response_body, @created_at)`,
      )
      .run(record);
  }

  /** Deletes the answers created before `before`; returns how many went. */
  pruneIdempotencyRecords(before: string): number {
    return this.db.prepare('DELETE FROM idempotency_keys WHERE created_at < ?').run(before).changes;
  }

  /** Logged metrics rows of a model, oldest first. */
  listStepMetrics(modelId: string): { split: string; step: number; metrics: Record<string, number> }[] {
    const rows = this.db
      .prepare('SELECT split, step, metrics FROM step_metrics WHERE model_id = ? ORDER BY sequence')
      .all(modelId) as { split: string; step: number; metrics: string }[];
    return rows.map((row) => ({
      split: row.split,
      step: row.step,
      metrics: JSON.parse(row.metrics) as Record<string, number>,
    }));
  }

  /** Appends one metrics row for a step and split; returns the step and split's merged metrics. */
  insertStepMetrics(modelId: string, step: number, split: string, metrics: Record<string, number>): StepMetricsRecord {
    return this.db.transaction(() => {
      const createdAt = now();
      this.db
        .prepare('INSERT INTO step_metrics (model_id, split, step, metrics, created_at) VALUES (?, ?, ?, ?, ?)')
        .run(modelId, split, step, JSON.stringify(metrics), createdAt);
      const rows = this.db
        .prepare('SELECT metrics FROM step_metrics WHERE model_id = ? AND step = ? AND split = ? ORDER BY sequence')
        .all(modelId, step, split) as { metrics: string }[];
      const merged: Record<string, number> = {};
      for (const row of rows) Object.assign(merged, JSON.parse(row.metrics) as Record<string, number>);
      return { step, split, metrics: merged, updated_at: createdAt };
    })();
  }

  /**
   * A page of a model's metrics merged per step and split (see {@link StepMetricsRecord}), by step
   * then split; undefined when `after` names no step and split of this model.
   */
  listMergedStepMetrics(
    modelId: string,
    query: {
      split?: string | undefined;
      after?: { step: number; split: string } | undefined;
      limit: number;
      /** Stored JSON a page reads at most (its first step and split always counts): it stops before the one that would pass it. */
      maxBytes?: number | undefined;
    },
  ): StorePage<StepMetricsRecord> | undefined {
    const splitFilter = query.split === undefined ? '' : ' AND split = @split';
    let cursorFilter = '';
    if (query.after !== undefined) {
      const exists = this.db
        .prepare('SELECT 1 FROM step_metrics WHERE model_id = ? AND step = ? AND split = ? LIMIT 1')
        .get(modelId, query.after.step, query.after.split);
      if (exists === undefined) return undefined;
      cursorFilter = ' AND (step > @afterStep OR (step = @afterStep AND split > @afterSplit))';
    }
    const keys = this.db
      .prepare(
        `SELECT DISTINCT step, split FROM step_metrics WHERE model_id = @modelId${splitFilter}${cursorFilter} ORDER BY step, split LIMIT @limit`,
      )
      .all({
        modelId,
        limit: query.limit + 1,
        ...(query.split === undefined ? {} : { split: query.split }),
        ...(query.after === undefined ? {} : { afterStep: query.after.step, afterSplit: query.after.split }),
      }) as { step: number; split: string }[];
    const candidates = keys.slice(0, query.limit);
    const firstCandidate = candidates[0];
    const lastCandidate = candidates[candidates.length - 1];
    if (firstCandidate === undefined || lastCandidate === undefined) return { items: [], hasMore: false };
    // The stored size of each step and split first (`octet_length` reads no data): a page stops
    // before the one that would take it past `maxBytes`, as the logged-groups list does.
    const sizes = new Map<string, number>();
    const sizeRows = this.db
      .prepare(
        `SELECT step, split, SUM(octet_length(metrics)) AS size FROM step_metrics WHERE model_id = @modelId AND step BETWEEN @first AND @last${splitFilter} GROUP BY step, split`,
      )
      .all({
        modelId,
        first: firstCandidate.step,
        last: lastCandidate.step,
        ...(query.split === undefined ? {} : { split: query.split }),
      }) as { step: number; split: string; size: number }[];
    for (const row of sizeRows) sizes.set(`${row.step}:${row.split}`, row.size);
    const maxBytes = query.maxBytes ?? Number.POSITIVE_INFINITY;
    const pageKeys: { step: number; split: string }[] = [];
    let bytes = 0;
    for (const key of candidates) {
      const size = sizes.get(`${key.step}:${key.split}`) ?? 0;
      if (pageKeys.length > 0 && bytes + size > maxBytes) break;
      bytes += size;
      pageKeys.push(key);
    }
    const first = pageKeys[0] as { step: number; split: string };
    const last = pageKeys[pageKeys.length - 1] as { step: number; split: string };
    const rows = this.db
      .prepare(
        // Only the page's own steps and splits: a neighbour left out for its size is not read.
        `SELECT split, step, metrics, created_at FROM step_metrics WHERE model_id = @modelId AND step BETWEEN @first AND @last AND (step > @first OR split >= @firstSplit) AND (step < @last OR split <= @lastSplit)${splitFilter} ORDER BY sequence`,
      )
      .all({
        modelId,
        first: first.step,
        last: last.step,
        firstSplit: first.split,
        lastSplit: last.split,
        ...(query.split === undefined ? {} : { split: query.split }),
      }) as { split: string; step: number; metrics: string; created_at: string }[];
    const merged = new Map<string, { metrics: Record<string, number>; updatedAt: string }>();
    for (const row of rows) {
      const key = `${row.step}:${row.split}`;
      const entry = merged.get(key) ?? { metrics: {}, updatedAt: row.created_at };
      Object.assign(entry.metrics, JSON.parse(row.metrics) as Record<string, number>);
      entry.updatedAt = row.created_at;
      merged.set(key, entry);
    }
    const items: StepMetricsRecord[] = [];
    for (const { step, split } of pageKeys) {
      const entry = merged.get(`${step}:${split}`);
      if (entry !== undefined) items.push({ step, split, metrics: entry.metrics, updated_at: entry.updatedAt });
    }
    return { items, hasMore: keys.length > pageKeys.length };
  }

  /** A page of registered models, newest first; undefined when `after` is not a model id. */
  listModelsPage(query: {
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
      const cursor = this.db.prepare('SELECT rowid FROM models WHERE id = ?').get(query.after) as
        | { rowid: number }
        | undefined;
      if (cursor === undefined) return undefined;
      filters.push('rowid < @cursor');
      parameters['cursor'] = cursor.rowid;
    }
    const where = filters.length === 0 ? '' : `WHERE ${filters.join(' AND ')}`;
    const rows = this.db
      .prepare(`SELECT * FROM models ${where} ORDER BY rowid DESC LIMIT @limit`)
      .all(parameters) as ModelRecord[];
    return { items: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
  }

  /** A page of a model's jobs, newest first; undefined when `after` is not a job of this model. */
  listJobsPage(
    modelId: string,
    query: { after?: string | undefined; limit: number },
  ): StorePage<JobRecord> | undefined {
    let cursor = Number.MAX_SAFE_INTEGER;
    if (query.after !== undefined) {
      const row = this.db.prepare('SELECT rowid FROM jobs WHERE model_id = ? AND id = ?').get(modelId, query.after) as
        | { rowid: number }
        | undefined;
      if (row === undefined) return undefined;
      cursor = row.rowid;
    }
    const rows = this.db
      .prepare('SELECT * FROM jobs WHERE model_id = ? AND rowid < ? ORDER BY rowid DESC LIMIT ?')
      .all(modelId, cursor, query.limit + 1) as JobRecord[];
    return { items: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
  }

  /**
   * A page of a model's logged trajectory groups in the order they were logged, optionally only
   * those of one step and/or split; undefined when `after` is not a logged group of this model.
   */
  listTrajectoryGroups(
    modelId: string,
    query: {
      step?: number | undefined;
      split?: string | undefined;
      after?: string | undefined;
      limit: number;
      /** Stored JSON a page holds at most (its first group always counts): it stops before the group that would pass it. */
      maxBytes?: number | undefined;
    },
  ): StorePage<TrajectoryGroupRecord> | undefined {
    const filters = ['model_id = @modelId'];
    const parameters: Record<string, string | number> = { modelId, limit: query.limit + 1 };
    if (query.step !== undefined) {
      filters.push('step = @step');
      parameters['step'] = query.step;
    }
    if (query.split !== undefined) {
      filters.push('split = @split');
      parameters['split'] = query.split;
    }
    if (query.after !== undefined) {
      const sequence = /^[1-9]\d{0,15}$/.test(query.after) ? Number(query.after) : undefined;
      const row =
        sequence === undefined
          ? undefined
          : this.db
              .prepare('SELECT 1 FROM trajectory_groups WHERE model_id = ? AND sequence = ?')
              .get(modelId, sequence);
      if (row === undefined) return undefined;
      filters.push('sequence > @after');
      parameters['after'] = sequence as number;
    }
    // Sizes first (`octet_length` reads no data), then each group's data while the page has room:
    // a page of groups each near the body limit would be gigabytes of JSON, more than one answer
    // (or one string) can hold.
    const rows = this.db
      .prepare(
        `SELECT sequence, step, split, octet_length(data) AS size, created_at FROM trajectory_groups WHERE ${filters.join(' AND ')} ORDER BY sequence LIMIT @limit`,
      )
      .all(parameters) as {
      sequence: number;
      step: number;
      split: string;
      size: number;
      created_at: string;
    }[];
    const selectData = this.db.prepare('SELECT data FROM trajectory_groups WHERE sequence = ?');
    const maxBytes = query.maxBytes ?? Number.POSITIVE_INFINITY;
    const items: TrajectoryGroupRecord[] = [];
    let bytes = 0;
    let hasMore = false;
    for (const row of rows) {
      if (items.length === query.limit || (items.length > 0 && bytes + row.size > maxBytes)) {
        hasMore = true;
        break;
      }
      bytes += row.size;
      items.push({
        id: String(row.sequence),
        step: row.step,
        split: row.split,
        created_at: row.created_at,
        group: storedGroup((selectData.get(row.sequence) as { data: string }).data),
      });
    }
    return { items, hasMore };
  }

  /** How many trajectory groups were logged for a model. */
  countTrajectoryGroups(modelId: string): number {
    return (
      this.db.prepare('SELECT COUNT(*) AS count FROM trajectory_groups WHERE model_id = ?').get(modelId) as {
        count: number;
      }
    ).count;
  }

  // ---- jobs ----

  /** Inserts a PENDING job. */
  createJob(fields: { modelId: string; kind: JobKind; request: unknown }): JobRecord {
    const createdAt = now();
    const record: JobRecord = {
      id: randomUUID(),
      model_id: fields.modelId,
      kind: fields.kind,
      status: 'PENDING',
      progress: null,
      num_sequences: null,
      steps_done: 0,
      error_message: null,
      request: JSON.stringify(fields.request),
      output_path: null,
      training_start: null,
      training_end: null,
      created_at: createdAt,
      updated_at: createdAt,
    };
    this.db
      .prepare(
        `INSERT INTO jobs (id, model_id, kind, status, progress, num_sequences, steps_done, error_message, request, output_path, training_start, training_end, created_at, updated_at)
         VALUES (@id, @model_id, @kind, @status, @progress, @num_sequences, @steps_done, @error_message, @request, @output_path, @training_start, @training_end, @created_at, @updated_at)`,
      )
      .run(record);
    return record;
  }

  /** A job by id. */
  getJob(id: string): JobRecord | undefined {
    return this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as JobRecord | undefined;
  }

  /** Jobs in the given states, oldest first. */
  jobsWithStatus(statuses: readonly TrainingJobStatus[]): JobRecord[] {
    const marks = statuses.map(() => '?').join(', ');
    return this.db
      .prepare(`SELECT * FROM jobs WHERE status IN (${marks}) ORDER BY created_at`)
      .all(...statuses) as JobRecord[];
  }

  /** PENDING -> RUNNING; false when the job is gone or not pending any more. */
  markJobRunning(id: string, outputPath: string): boolean {
    const time = now();
    const result = this.db
      .prepare(
        "UPDATE jobs SET status = 'RUNNING', progress = 0, output_path = ?, training_start = ?, updated_at = ? WHERE id = ? AND status = 'PENDING'",
      )
      .run(outputPath, time, time, id);
    return result.changes === 1;
  }

  /**
   * Records a `training_started` or `gradient_step` event of a RUNNING job and updates its
   * progress (gradient steps done / `num_sequences`). Ignored once the job is not RUNNING.
   */
  recordProgressEvent(jobId: string, type: 'training_started' | 'gradient_step', data: Record<string, unknown>): void {
    this.db.transaction(() => {
      const job = this.getJob(jobId);
      if (job === undefined || job.status !== 'RUNNING') return;
      const time = now();
      if (type === 'training_started') {
        const numSequences = typeof data['num_sequences'] === 'number' ? data['num_sequences'] : null;
        this.db
          .prepare('UPDATE jobs SET num_sequences = ?, updated_at = ? WHERE id = ?')
          .run(numSequences, time, jobId);
      } else {
        const stepsDone = job.steps_done + 1;
        const progress =
          job.num_sequences !== null && job.num_sequences > 0
            ? Math.min(1, stepsDone / job.num_sequences)
            : job.progress;
        this.db
          .prepare('UPDATE jobs SET steps_done = ?, progress = ?, updated_at = ? WHERE id = ?')
          .run(stepsDone, progress, time, jobId);
      }
      this.insertEvent(jobId, type, data, time);
    })();
  }

  /**
   * Finishes a RUNNING job: inserts its checkpoint, advances the model's step, marks the job
   * COMPLETED and appends `training_ended`, in one transaction (the checkpoint is visible before
   * the event). Returns false, changing nothing, when the job or its model is gone or the job is
   * no longer RUNNING.
   */
  completeJob(jobId: string, checkpoint: { step: number; metrics: Record<string, number>; path: string }): boolean {
    return this.db.transaction(() => {
      const job = this.getJob(jobId);
      if (job === undefined || job.status !== 'RUNNING') return false;
      const model = this.getModel(job.model_id);
      if (model === undefined) return false;
      const time = now();
      this.db.prepare('DELETE FROM checkpoints WHERE model_id = ? AND step = ?').run(model.id, checkpoint.step);
      this.db
        .prepare('INSERT INTO checkpoints (id, model_id, step, metrics, path, created_at) VALUES (?, ?, ?, ?, ?, ?)')
        .run(randomUUID(), model.id, checkpoint.step, JSON.stringify(checkpoint.metrics), checkpoint.path, time);
      this.db
        .prepare('UPDATE models SET latest_step = MAX(latest_step, ?) WHERE id = ?')
        .run(checkpoint.step, model.id);
      this.db
        .prepare("UPDATE jobs SET status = 'COMPLETED', progress = 1, training_end = ?, updated_at = ? WHERE id = ?")
        .run(time, time, jobId);
      this.insertEvent(jobId, 'training_ended', {}, time);
      return true;
    })();
  }

  /**
   * Fails a PENDING or RUNNING job with its terminal `training_failed` event. Returns false,
   * changing nothing, when the job is gone or already ended (so there is exactly one terminal event).
   */
  failJob(jobId: string, message: string): boolean {
    return this.db.transaction(() => {
      const job = this.getJob(jobId);
      if (job === undefined || (job.status !== 'PENDING' && job.status !== 'RUNNING')) return false;
      const time = now();
      this.db
        .prepare("UPDATE jobs SET status = 'FAILED', error_message = ?, training_end = ?, updated_at = ? WHERE id = ?")
        .run(message, time, time, jobId);
      this.insertEvent(jobId, 'training_failed', { error_message: message }, time);
      return true;
    })();
  }

  /** A page of a job's events in order; undefined when `after` is not an event of this job. */
  listEvents(jobId: string, query: { after?: string | undefined; limit: number }): StorePage<EventRecord> | undefined {
    let from = 0;
    if (query.after !== undefined) {
      const cursor = this.db
        .prepare('SELECT sequence FROM job_events WHERE job_id = ? AND id = ?')
        .get(jobId, query.after) as { sequence: number } | undefined;
      if (cursor === undefined) return undefined;
      from = cursor.sequence;
    }
    const rows = this.db
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
  onJobEvent(jobId: string, listener: () => void): () => void {
    let listeners = this.eventListeners.get(jobId);
    if (listeners === undefined) {
      listeners = new Set();
      this.eventListeners.set(jobId, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.eventListeners.get(jobId) === listeners) this.eventListeners.delete(jobId);
    };
  }

  private insertEvent(jobId: string, type: TrainingJobEventType, data: Record<string, unknown>, time: string): void {
    this.db
      .prepare('INSERT INTO job_events (id, job_id, type, data, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(randomUUID(), jobId, type, JSON.stringify(data), time);
    for (const listener of this.eventListeners.get(jobId) ?? []) listener();
  }
}

function toCheckpoint(row: CheckpointRow): CheckpointRecord {
  return { ...row, metrics: JSON.parse(row.metrics) as Record<string, number> };
}

function migrate(db: SqliteDatabase): void {
  const version = Number(db.pragmaValue('user_version'));
  if (version > MIGRATIONS.length) {
    throw new Error(
      `The store's schema version is ${version}, newer than this policyloop knows (${MIGRATIONS.length}); upgrade policyloop or use another data directory.`,
    );
  }
  for (let index = version; index < MIGRATIONS.length; index += 1) {
    const migration = MIGRATIONS[index] as string;
    db.transaction(() => {
      db.exec(migration);
      db.exec(`PRAGMA user_version = ${index + 1}`);
    })();
  }
}

/**
 * A stored group as the API returns it: the log route may store a group as the client sent it
 * (defaults left out, unknown keys kept), so it is normalized here as validation did on the way in.
 */
function storedGroup(data: string): unknown {
  const value = JSON.parse(data) as unknown;
  return fastParseTrajectoryGroup(value) ?? TrajectoryGroup.parse(value);
}
