/**
 * The metric history of a model: `history.jsonl`, one row a line, each carrying `training_step`
 * (the policy version the numbers describe) and metric names prefixed by split (`val/reward`).
 */
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { PolicyloopError } from '../internal/errors.js';

/** One line of `history.jsonl`. */
export interface HistoryRow {
  /** The step (policy version) the metrics describe. */
  readonly training_step: number;
  /** When the row was written (ISO 8601). */
  readonly recorded_at: string;
  /** Metric name (`train/reward`, `val/reward`, `train/loss`, ...) to value. */
  readonly [metric: string]: number | boolean | string;
}

/**
 * Appends one row to a history file, creating its directory. Rows are whole lines written with a
 * single append, so a reader never sees half a row from a finished write.
 * @example
 * await appendHistoryRow(files.history, { 'val/reward': 0.8 }, 3);
 */
export async function appendHistoryRow(
  file: string,
  metrics: Readonly<Record<string, number | boolean>>,
  trainingStep: number,
): Promise<HistoryRow> {
  const row: HistoryRow = { ...metrics, training_step: trainingStep, recorded_at: new Date().toISOString() };
  await mkdir(path.dirname(file), { recursive: true });
  await appendFile(file, `${JSON.stringify(row)}\n`, 'utf8');
  return row;
}

/**
 * Reads every row of a history file; an absent file is an empty history. A torn last line (from a
 * process killed mid-write) is skipped; any other unparseable line is an error naming the line.
 */
export async function readHistory(file: string): Promise<HistoryRow[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const lines = text.split('\n');
  const rows: HistoryRow[] = [];
  for (const [index, line] of lines.entries()) {
    if (line.trim() === '') continue;
    try {
      const row = JSON.parse(line) as HistoryRow;
      if (typeof row.training_step !== 'number') throw new Error('no numeric `training_step`');
      rows.push(row);
    } catch (error) {
      if (index === lines.length - 1) continue;
      throw new PolicyloopError(
        `Expected a JSON object with \`training_step\` on line ${index + 1} of ${file}, ` +
          `got ${JSON.stringify(line.slice(0, 80))}`,
        { cause: error },
      );
    }
  }
  return rows;
}

/**
 * The last value of `metric` recorded at each training step.
 * @example
 * metricByStep(rows, 'val/reward'); // Map { 0 => 0.2, 1 => 0.55, 2 => 0.8 }
 */
export function metricByStep(rows: readonly HistoryRow[], metric: string): Map<number, number> {
  const values = new Map<number, number>();
  for (const row of rows) {
    const value = row[metric];
    if (typeof value === 'number' && Number.isFinite(value)) values.set(row.training_step, value);
  }
  return values;
}

/** One `POST /v1/local/models/{id}/metrics` body: a split's unprefixed metrics at a step. */
export interface StepMetricsBody {
  /** The step the metrics describe. */
  readonly step: number;
  /** The split (`train`, `val`, `sft`, ...). */
  readonly split: string;
  /** Metric names without the split prefix (`reward`, `loss`) to finite numbers. */
  readonly metrics: Record<string, number>;
}

/**
 * The families of a step's row that are not splits (`time/step`, `rollouts/failed`,
 * `groups/dropped_stale`, `idle/service`): the local service keeps them in the split of the step's
 * job (`train`, or `sft` for an SFT step) under their full names, and they come back as written.
 */
export const STEP_FAMILIES: ReadonlySet<string> = new Set(['groups', 'rollouts', 'time', 'idle']);

/** The split a row's {@link STEP_FAMILIES} go with: its job's, `sft` for an SFT step's row, else `train`. */
export function familySplit(row: Readonly<Record<string, unknown>>): 'sft' | 'train' {
  return Object.keys(row).some((name) => name.startsWith('sft/')) ? 'sft' : 'train';
}

/**
 * The split a history metric belongs to: its prefix (`val` of `val/reward`), `familySplit` (the
 * row's, from {@link familySplit}) for the {@link STEP_FAMILIES}, or undefined for a name without
 * a prefix.
 * @example
 * splitOf('time/step', 'train'); // 'train'
 */
export function splitOf(name: string, familySplit: string): string | undefined {
  const slash = name.indexOf('/');
  if (slash <= 0) return undefined;
  const prefix = name.slice(0, slash);
  return STEP_FAMILIES.has(prefix) ? familySplit : prefix;
}

/** A service metric's name in a history row: `val/reward` for `reward` of `val`; a family's name as it is. */
export function historyMetricName(split: string, name: string): string {
  const slash = name.indexOf('/');
  return slash > 0 && STEP_FAMILIES.has(name.slice(0, slash)) ? name : `${split}/${name}`;
}

/**
 * Splits a history row's prefixed metrics (`train/loss`, `val/reward`) into one body per split
 * with unprefixed names, as the local service's metrics route takes them. Names without a split
 * prefix (or that the route refuses) and values that are not finite numbers stay in
 * `history.jsonl` only.
 * @example
 * toStepMetricsBodies({ 'train/loss': 0.4, 'val/reward': 0.8 }, 3);
 * // [{ step: 3, split: 'train', metrics: { loss: 0.4 } }, { step: 3, split: 'val', metrics: { reward: 0.8 } }]
 */
export function toStepMetricsBodies(
  metrics: Readonly<Record<string, number | boolean | string>>,
  step: number,
): StepMetricsBody[] {
  const bySplit = new Map<string, Record<string, number>>();
  // A step's families (`time/step`...) go with its job's split: `sft` for an SFT step's row.
  const home = familySplit(metrics);
  for (const [name, value] of Object.entries(metrics)) {
    const slash = name.indexOf('/');
    if (slash <= 0 || slash === name.length - 1) continue;
    if (typeof value !== 'number' || !Number.isFinite(value)) continue;
    const family = STEP_FAMILIES.has(name.slice(0, slash));
    const split = family ? home : name.slice(0, slash);
    const unprefixed = family ? name : name.slice(slash + 1);
    // The service refuses names over 200 characters and ones that repeat the split prefix.
    if (unprefixed.length > 200 || unprefixed.startsWith(`${split}/`)) continue;
    const entry = bySplit.get(split) ?? {};
    bySplit.set(split, entry);
    entry[unprefixed] = value;
  }
  return [...bySplit].map(([split, splitMetrics]) => ({ step, split, metrics: splitMetrics }));
}

/** A merged step-metrics item of the local service (`client.local.metrics.list`). */
export interface ServiceStepMetrics {
  readonly step: number;
  readonly split: string;
  readonly metrics: Readonly<Record<string, number>>;
  readonly updated_at: string;
}

/**
 * The local service's step metrics as history rows: one row per step (oldest first) holding every
 * split's metrics with the split prefix (`val/reward`), `recorded_at` the newest update among them.
 * @example
 * historyRowsFromService([{ step: 0, split: 'val', metrics: { reward: 0.5 }, updated_at: '...' }]);
 * // [{ training_step: 0, recorded_at: '...', 'val/reward': 0.5 }]
 */
export function historyRowsFromService(items: readonly ServiceStepMetrics[]): HistoryRow[] {
  const byStep = new Map<number, { recorded_at: string; metrics: Record<string, number> }>();
  for (const item of items) {
    const row = byStep.get(item.step) ?? { recorded_at: item.updated_at, metrics: {} };
    byStep.set(item.step, row);
    if (item.updated_at > row.recorded_at) row.recorded_at = item.updated_at;
    for (const [name, value] of Object.entries(item.metrics)) row.metrics[historyMetricName(item.split, name)] = value;
  }
  return [...byStep]
    .sort(([a], [b]) => a - b)
    .map(([step, row]) => ({ training_step: step, recorded_at: row.recorded_at, ...row.metrics }));
}

/** Where the service's history and `history.jsonl` disagree, by step (each list ascending). */
export interface HistoryDifference {
  /** Steps with a metric only the service has (e.g. written by a client with another data dir). */
  readonly onlyInService: number[];
  /** Steps with a metric only `history.jsonl` has (e.g. a send that has not reached the service). */
  readonly onlyInFile: number[];
  /** Steps where a metric has different values in the two. */
  readonly differing: number[];
}

/**
 * Compares the service's history with `history.jsonl`'s, per step and metric name (numbers only;
 * a later row of a step replaces an earlier value, as the service merges). Null when they agree.
 * @example
 * compareHistories(serviceRows, fileRows); // { onlyInService: [], onlyInFile: [4], differing: [] }
 */
export function compareHistories(
  service: readonly HistoryRow[],
  file: readonly HistoryRow[],
): HistoryDifference | null {
  const serviceValues = numericMetricsByStep(service);
  const fileValues = numericMetricsByStep(file);
  const onlyInService = new Set<number>();
  const onlyInFile = new Set<number>();
  const differing = new Set<number>();
  for (const [step, metrics] of serviceValues) {
    const other = fileValues.get(step);
    for (const [name, value] of metrics) {
      const fileValue = other?.get(name);
      if (fileValue === undefined) onlyInService.add(step);
      else if (fileValue !== value) differing.add(step);
    }
  }
  for (const [step, metrics] of fileValues) {
    const other = serviceValues.get(step);
    for (const name of metrics.keys()) if (other?.get(name) === undefined) onlyInFile.add(step);
  }
  if (onlyInService.size + onlyInFile.size + differing.size === 0) return null;
  const sorted = (steps: Set<number>) => [...steps].sort((a, b) => a - b);
  return { onlyInService: sorted(onlyInService), onlyInFile: sorted(onlyInFile), differing: sorted(differing) };
}

function numericMetricsByStep(rows: readonly HistoryRow[]): Map<number, Map<string, number>> {
  const byStep = new Map<number, Map<string, number>>();
  for (const row of rows) {
    const metrics = byStep.get(row.training_step) ?? new Map<string, number>();
    byStep.set(row.training_step, metrics);
    for (const [name, value] of Object.entries(row)) {
      if (name === 'training_step' || name === 'recorded_at' || !name.includes('/')) continue;
      if (typeof value === 'number' && Number.isFinite(value)) metrics.set(name, value);
    }
  }
  return byStep;
}
