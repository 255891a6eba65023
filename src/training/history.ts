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
