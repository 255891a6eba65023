/**
 * The `step_metrics` table: a model's metrics per step and split, one row per write, merged when
 * read. Rows come from the log route (with the weight of each mean, so that later logs of the same
 * step merge as one) and from `POST /v1/local/models/{id}/metrics` (plain values, later keys win).
 * A new source of a step's metrics appends rows here, and every reader sees them.
 */
import { mergeStepStatistics, type StepStatistics } from '../../schema/metrics.js';
import { now, type StoreConnection, type StorePage } from './connection.js';

/** The metrics of one step and split, merged from its rows in the order they were recorded (later keys win). */
export interface StepMetricsRecord {
  readonly step: number;
  readonly split: string;
  readonly metrics: Record<string, number>;
  /** When the newest merged row was recorded. */
  readonly updated_at: string;
}

/** Where a step and split sit in the list: by step, then split. */
interface StepKey {
  step: number;
  split: string;
}

/** The models' metrics by step and split. */
export class StepMetricStore {
  /** @param connection The store's connection. */
  constructor(private readonly connection: StoreConnection) {}

  /** Appends one metrics row for a step and split; returns the step and split's merged metrics. */
  append(modelId: string, step: number, split: string, metrics: Record<string, number>): StepMetricsRecord {
    return this.connection.transaction(() => {
      const createdAt = now();
      this.connection
        .prepare('INSERT INTO step_metrics (model_id, split, step, metrics, created_at) VALUES (?, ?, ?, ?, ?)')
        .run(modelId, split, step, JSON.stringify(metrics), createdAt);
      const rows = this.connection
        .prepare('SELECT metrics FROM step_metrics WHERE model_id = ? AND step = ? AND split = ? ORDER BY sequence')
        .all(modelId, step, split) as { metrics: string }[];
      const merged: Record<string, number> = {};
      for (const row of rows) Object.assign(merged, JSON.parse(row.metrics) as Record<string, number>);
      return { step, split, metrics: merged, updated_at: createdAt };
    });
  }

  /**
   * Appends a logged batch's statistics for a step and split, merged with the step and split's
   * earlier log rows (means weighted, counts added), so that a log sent in several requests (the
   * client batches) gives the metrics of all its groups. Part of the log write: see `LogStore.insert`.
   */
  appendLogged(modelId: string, step: number, split: string, statistics: StepStatistics, createdAt: string): void {
    const earlier = this.connection
      .prepare(
        'SELECT metrics, weights FROM step_metrics WHERE model_id = ? AND step = ? AND split = ? AND weights IS NOT NULL ORDER BY sequence DESC LIMIT 1',
      )
      .get(modelId, step, split) as { metrics: string; weights: string } | undefined;
    const merged =
      earlier === undefined
        ? statistics
        : mergeStepStatistics(
            { metrics: JSON.parse(earlier.metrics), weights: JSON.parse(earlier.weights) },
            statistics,
          );
    this.connection
      .prepare(
        'INSERT INTO step_metrics (model_id, split, step, metrics, weights, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(modelId, split, step, JSON.stringify(merged.metrics), JSON.stringify(merged.weights), createdAt);
  }

  /**
   * A page of a model's metrics merged per step and split (see {@link StepMetricsRecord}), by step
   * then split; undefined when `after` names no step and split of this model.
   */
  listMerged(
    modelId: string,
    query: {
      split?: string | undefined;
      after?: StepKey | undefined;
      limit: number;
      /** Stored JSON a page reads at most (its first step and split always counts): it stops before the one that would pass it. */
      maxBytes?: number | undefined;
    },
  ): StorePage<StepMetricsRecord> | undefined {
    const keys = this.keysAfter(modelId, query);
    if (keys === undefined) return undefined;
    const pageKeys = this.keysWithin(modelId, keys.slice(0, query.limit), query);
    if (pageKeys.length === 0) return { items: [], hasMore: false };
    const merged = this.mergedRows(modelId, pageKeys, query.split);
    const items: StepMetricsRecord[] = [];
    for (const { step, split } of pageKeys) {
      const entry = merged.get(`${step}:${split}`);
      if (entry !== undefined) items.push({ step, split, metrics: entry.metrics, updated_at: entry.updatedAt });
    }
    return { items, hasMore: keys.length > pageKeys.length };
  }

  /** Up to `limit + 1` steps and splits after the cursor; undefined when the cursor is unknown. */
  private keysAfter(
    modelId: string,
    query: { split?: string | undefined; after?: StepKey | undefined; limit: number },
  ): StepKey[] | undefined {
    const splitFilter = query.split === undefined ? '' : ' AND split = @split';
    let cursorFilter = '';
    if (query.after !== undefined) {
      const exists = this.connection
        .prepare('SELECT 1 FROM step_metrics WHERE model_id = ? AND step = ? AND split = ? LIMIT 1')
        .get(modelId, query.after.step, query.after.split);
      if (exists === undefined) return undefined;
      cursorFilter = ' AND (step > @afterStep OR (step = @afterStep AND split > @afterSplit))';
    }
    return this.connection
      .prepare(
        `SELECT DISTINCT step, split FROM step_metrics WHERE model_id = @modelId${splitFilter}${cursorFilter} ORDER BY step, split LIMIT @limit`,
      )
      .all({
        modelId,
        limit: query.limit + 1,
        ...(query.split === undefined ? {} : { split: query.split }),
        ...(query.after === undefined ? {} : { afterStep: query.after.step, afterSplit: query.after.split }),
      }) as StepKey[];
  }

  /**
   * The first of `candidates` that fit in `maxBytes` of stored JSON (at least one). Sizes first
   * (`octet_length` reads no data): a page stops before the step and split that would take it
   * past `maxBytes`, as the logged-groups list does.
   */
  private keysWithin(
    modelId: string,
    candidates: readonly StepKey[],
    query: { split?: string | undefined; maxBytes?: number | undefined },
  ): StepKey[] {
    const firstCandidate = candidates[0];
    const lastCandidate = candidates[candidates.length - 1];
    if (firstCandidate === undefined || lastCandidate === undefined) return [];
    const sizes = new Map<string, number>();
    const splitFilter = query.split === undefined ? '' : ' AND split = @split';
    const sizeRows = this.connection
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
    const pageKeys: StepKey[] = [];
    let bytes = 0;
    for (const key of candidates) {
      const size = sizes.get(`${key.step}:${key.split}`) ?? 0;
      if (pageKeys.length > 0 && bytes + size > maxBytes) break;
      bytes += size;
      pageKeys.push(key);
    }
    return pageKeys;
  }

  /** The rows of the page's steps and splits merged per `"<step>:<split>"`, in the order recorded. */
  private mergedRows(
    modelId: string,
    pageKeys: readonly StepKey[],
    split: string | undefined,
  ): Map<string, { metrics: Record<string, number>; updatedAt: string }> {
    const first = pageKeys[0] as StepKey;
    const last = pageKeys[pageKeys.length - 1] as StepKey;
    const splitFilter = split === undefined ? '' : ' AND split = @split';
    const rows = this.connection
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
        ...(split === undefined ? {} : { split }),
      }) as { split: string; step: number; metrics: string; created_at: string }[];
    const merged = new Map<string, { metrics: Record<string, number>; updatedAt: string }>();
    for (const row of rows) {
      const key = `${row.step}:${row.split}`;
      const entry = merged.get(key) ?? { metrics: {}, updatedAt: row.created_at };
      Object.assign(entry.metrics, JSON.parse(row.metrics) as Record<string, number>);
      entry.updatedAt = row.created_at;
      merged.set(key, entry);
    }
    return merged;
  }
}
