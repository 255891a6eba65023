/**
 * The `trajectory_groups` table: the groups the log route received, one row each, and the log
 * write that stores them with their step's metrics (`StepMetricStore`) in one transaction.
 */
import type { StepStatistics } from '../../schema/metrics.js';
import { fastParseTrajectoryGroup } from '../../schema/fast-parse.js';
import { TrajectoryGroup } from '../../schema/index.js';
import { now, type StoreConnection, type StorePage } from './connection.js';
import type { StepMetricStore } from './step-metrics.js';

/** A logged trajectory group; `id` is its sequence number as a string. */
export interface TrajectoryGroupRecord {
  readonly id: string;
  readonly step: number;
  readonly split: string;
  readonly created_at: string;
  /** The group as the log route validated it. */
  readonly group: unknown;
}

/** One log request's groups and their statistics, as {@link LogStore.insert} stores them. */
export interface LogEntry {
  readonly modelId: string;
  readonly split: string;
  readonly step: number;
  readonly groups: readonly unknown[];
  /** Each group's JSON as received, stored instead of serializing `groups` again (same order). */
  readonly groupTexts?: readonly string[] | undefined;
  readonly statistics: StepStatistics;
}

/** The logged trajectory groups. */
export class LogStore {
  /**
   * @param connection The store's connection.
   * @param stepMetrics Where a log's statistics go.
   */
  constructor(
    private readonly connection: StoreConnection,
    private readonly stepMetrics: StepMetricStore,
  ) {}

  /**
   * Stores logged groups (one row each) and the step's metrics, atomically. The metrics row is
   * merged with the step and split's earlier log rows (means weighted, counts added), so that a log
   * sent in several requests (the client batches) gives the metrics of all its groups.
   */
  insert(entry: LogEntry): void {
    this.connection.transaction(() => {
      const createdAt = now();
      const insertGroup = this.connection.prepare(
        'INSERT INTO trajectory_groups (model_id, split, step, data, created_at) VALUES (?, ?, ?, ?, ?)',
      );
      const texts = entry.groupTexts;
      entry.groups.forEach((group, index) => {
        const data = texts?.[index] ?? JSON.stringify(group);
        insertGroup.run(entry.modelId, entry.split, entry.step, data, createdAt);
      });
      this.stepMetrics.appendLogged(entry.modelId, entry.step, entry.split, entry.statistics, createdAt);
    });
  }

  /**
   * A page of a model's logged trajectory groups in the order they were logged, optionally only
   * those of one step and/or split; undefined when `after` is not a logged group of this model.
   */
  listGroups(
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
          : this.connection
              .prepare('SELECT 1 FROM trajectory_groups WHERE model_id = ? AND sequence = ?')
              .get(modelId, sequence);
      if (row === undefined) return undefined;
      filters.push('sequence > @after');
      parameters['after'] = sequence as number;
    }
    // Sizes first (`octet_length` reads no data), then each group's data while the page has room:
    // a page of groups each near the body limit would be gigabytes of JSON, more than one answer
    // (or one string) can hold.
    const rows = this.connection
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
    const selectData = this.connection.prepare('SELECT data FROM trajectory_groups WHERE sequence = ?');
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
}

/**
 * A stored group as the API returns it: the log route may store a group as the client sent it
 * (defaults left out, unknown keys kept), so it is normalized here as validation did on the way in.
 */
function storedGroup(data: string): unknown {
  const value = JSON.parse(data) as unknown;
  return fastParseTrajectoryGroup(value) ?? TrajectoryGroup.parse(value);
}
