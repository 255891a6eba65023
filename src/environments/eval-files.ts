/**
 * The files of an evaluation (`results.jsonl`, one line per rollout, and `metadata.json`, the
 * run's settings and numbers), the numbers themselves, and reading a run back (for `resume` and
 * `rescore`). Lines are appended a group at a time, in one write; the metadata is written to a
 * temporary file and renamed over the old one, so a run killed at any moment leaves whole
 * metadata and at worst a torn last line, which reading drops.
 */
import { createRequire } from 'node:module';
import { renameSync, writeFileSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PolicyloopError } from '../internal/errors.js';
import type { ChatCompletionMessageParam } from '../schema/index.js';
import { summarizePassAtK } from './pass-at-k.js';

/** The file of an evaluation's rollouts, one JSON object a line. */
export const RESULTS_FILE = 'results.jsonl';
/** The file of an evaluation's settings and numbers. */
export const METADATA_FILE = 'metadata.json';

/**
 * One rollout of an evaluation: a line of `results.jsonl` (field names as the file spells them).
 * @example
 * const correct = rows.filter((row) => row.error === null && (row.reward ?? 0) >= 0.5);
 */
export interface EvaluationRow {
  /** The task's position in the environment's `evalDataset` (0-based). */
  example_id: number;
  /** Which rollout of the task (0 to rollouts per example - 1). */
  rollout_index: number;
  /** The task, as JSON. */
  task: unknown;
  /** The trajectory's main conversation as plain chat messages (empty for a rollout that threw). */
  messages: ChatCompletionMessageParam[];
  /** Its sub-agents' conversations (`additional_histories`), when it has any. */
  additional_histories?: ChatCompletionMessageParam[][] | undefined;
  /** The reward; null for an error row. */
  reward: number | null;
  /** Each rubric function's value (and any metric the rollout recorded). */
  metrics: Record<string, number>;
  /** Null, or what the rollout, a rubric function or the group judge threw. */
  error: string | null;
  /** The model name the rollout called. */
  model: string;
  /** The rollout's wall time (rollout and reward), in seconds. */
  seconds: number;
}

/**
 * `metadata.json`: the settings of an evaluation and its numbers (field names as the file spells
 * them). Numbers with no row to average are null.
 * @example
 * const metadata = JSON.parse(await readFile('out/metadata.json', 'utf8')) as EvaluationMetadata;
 * console.log(metadata.pass_at_k['1']);
 */
export interface EvaluationMetadata {
  /** The environment as it was named (`policyloop eval <env>`, or `evaluate`'s `envId`). */
  env_id: string;
  /** The arguments it was loaded with. */
  env_args: Record<string, unknown>;
  /** The model name. */
  model: string;
  /** The OpenAI-compatible endpoint the model was called at. */
  base_url: string | null;
  /** How many tasks (the first of `evalDataset`). */
  num_examples: number;
  /** Rollouts of each task. */
  rollouts_per_example: number;
  /** The request parameters of every model call (`temperature`, `max_tokens`...). */
  sampling: Record<string, unknown>;
  /** A rollout is correct (for pass@k) when its reward >= threshold. */
  threshold: number;
  /** Mean reward of the rows without error. */
  avg_reward: number | null;
  /** Its standard deviation (population). */
  std_reward: number | null;
  /** Mean of each metric over the rows without error that have it. */
  avg_metrics: Record<string, number>;
  /** Standard deviation (population) of each metric. */
  std_metrics: Record<string, number>;
  /** pass@k keyed by k ("1", "2", "4", ...). */
  pass_at_k: Record<string, number>;
  /** pass^k keyed by k. */
  pass_all_k: Record<string, number>;
  /** The number of error rows. */
  errors: number;
  /** When the file was written (ISO 8601). */
  date: string;
  /** The policyloop version that wrote it. */
  version: string;
}

/** The numbers of an evaluation, computed from its rows (camelCase: what `evaluate` returns). */
export interface EvaluationNumbers {
  /** Mean reward of the rows without error (NaN when there is none). */
  readonly avgReward: number;
  /** Its standard deviation (population; NaN when there is no row). */
  readonly stdReward: number;
  /** Mean of each metric over the rows without error that have it. */
  readonly avgMetrics: Record<string, number>;
  /** Standard deviation (population) of each metric. */
  readonly stdMetrics: Record<string, number>;
  /** pass@k keyed by k ("1", "2", "4": the powers of two up to the rollouts per example). */
  readonly passAtK: Record<string, number>;
  /** pass^k keyed by k. */
  readonly passAllK: Record<string, number>;
  /** The number of error rows (a rollout, a rubric function or the group judge threw). */
  readonly errors: number;
}

/** Mean and population standard deviation of `values` (NaN for none). */
function meanAndStd(values: readonly number[]): { mean: number; std: number } {
  if (values.length === 0) return { mean: Number.NaN, std: Number.NaN };
  let sum = 0;
  for (const value of values) sum += value;
  const mean = sum / values.length;
  let squares = 0;
  for (const value of values) squares += (value - mean) ** 2;
  return { mean, std: Math.sqrt(squares / values.length) };
}

/**
 * The numbers of an evaluation from its rows: reward and metrics over the rows without error,
 * pass@k and pass^k over the tasks (a row is correct when it has no error and reward >= threshold).
 * @example
 * const numbers = summarizeRows(rows, { rolloutsPerExample: 4, threshold: 0.5 });
 */
export function summarizeRows(
  rows: readonly EvaluationRow[],
  settings: { readonly rolloutsPerExample: number; readonly threshold: number },
): EvaluationNumbers {
  const rewards: number[] = [];
  const metricValues = new Map<string, number[]>();
  const tasks = new Map<number, { n: number; c: number }>();
  let errors = 0;
  for (const row of rows) {
    const task = tasks.get(row.example_id) ?? { n: 0, c: 0 };
    tasks.set(row.example_id, task);
    task.n += 1;
    if (row.error !== null || row.reward === null) {
      errors += 1;
      continue;
    }
    rewards.push(row.reward);
    if (row.reward >= settings.threshold) task.c += 1;
    for (const [name, value] of Object.entries(row.metrics)) {
      const number = Number(value);
      if (!Number.isFinite(number)) continue;
      let values = metricValues.get(name);
      if (values === undefined) {
        values = [];
        metricValues.set(name, values);
      }
      values.push(number);
    }
  }
  const reward = meanAndStd(rewards);
  const avgMetrics: Record<string, number> = {};
  const stdMetrics: Record<string, number> = {};
  for (const name of [...metricValues.keys()].sort()) {
    const { mean, std } = meanAndStd(metricValues.get(name) ?? []);
    avgMetrics[name] = mean;
    stdMetrics[name] = std;
  }
  const { passAtK, passAllK } = summarizePassAtK([...tasks.values()], settings.rolloutsPerExample);
  return { avgReward: reward.mean, stdReward: reward.std, avgMetrics, stdMetrics, passAtK, passAllK, errors };
}

/** The package's version (`metadata.json`'s `version`). */
export function packageVersion(): string {
  // src/environments/ and dist/environments/ are both two folders below package.json.
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
}

/** The settings part of `metadata.json` (what a run is started with). */
export type EvaluationSettings = Pick<
  EvaluationMetadata,
  'env_id' | 'env_args' | 'model' | 'base_url' | 'num_examples' | 'rollouts_per_example' | 'sampling' | 'threshold'
>;

/** `metadata.json` for `settings` and `numbers`, dated now. */
export function metadataOf(settings: EvaluationSettings, numbers: EvaluationNumbers): EvaluationMetadata {
  const finite = (value: number): number | null => (Number.isFinite(value) ? value : null);
  return {
    ...settings,
    avg_reward: finite(numbers.avgReward),
    std_reward: finite(numbers.stdReward),
    avg_metrics: numbers.avgMetrics,
    std_metrics: numbers.stdMetrics,
    pass_at_k: numbers.passAtK,
    pass_all_k: numbers.passAllK,
    errors: numbers.errors,
    date: new Date().toISOString(),
    version: packageVersion(),
  };
}

/** Writes `text` to `file` through a temporary file renamed over it (never a half-written file). */
export async function writeFileAtomically(file: string, text: string): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, text);
  await rename(temporary, file);
}

/** {@link writeMetadata}, synchronously (what a run does after each group: see `evaluate`). */
export function writeMetadataSync(directory: string, metadata: EvaluationMetadata): void {
  const file = path.join(directory, METADATA_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(metadata, null, 2)}\n`);
  renameSync(temporary, file);
}

/** Writes `metadata` to `DIR/metadata.json` (atomically). */
export async function writeMetadata(directory: string, metadata: EvaluationMetadata): Promise<void> {
  await writeFileAtomically(path.join(directory, METADATA_FILE), `${JSON.stringify(metadata, null, 2)}\n`);
}

/** The lines of `rows` (each ending with a newline). */
export function rowLines(rows: readonly EvaluationRow[]): string {
  let text = '';
  for (const row of rows) text += `${JSON.stringify(row)}\n`;
  return text;
}

/** An evaluation folder as read back: its metadata and its rows. */
export interface SavedEvaluation {
  /** `metadata.json`. */
  readonly metadata: EvaluationMetadata;
  /** Every parseable row of `results.jsonl`, in file order. */
  readonly rows: EvaluationRow[];
  /** How many lines were dropped (torn or not a row). */
  readonly dropped: number;
}

/** Whether `value` has the fields of an {@link EvaluationRow} that reading relies on. */
function isRow(value: unknown): value is EvaluationRow {
  if (typeof value !== 'object' || value === null) return false;
  const row = value as Record<string, unknown>;
  return (
    Number.isInteger(row['example_id']) &&
    Number.isInteger(row['rollout_index']) &&
    Array.isArray(row['messages']) &&
    (row['reward'] === null || typeof row['reward'] === 'number') &&
    (row['error'] === null || typeof row['error'] === 'string') &&
    typeof row['metrics'] === 'object' &&
    row['metrics'] !== null
  );
}

/**
 * Reads an evaluation folder: `metadata.json` (required) and the rows of `results.jsonl` (a torn
 * last line, or any line that is not a row, is dropped and counted).
 * @throws {PolicyloopError} when the folder has no readable `metadata.json`.
 */
export async function readEvaluation(directory: string): Promise<SavedEvaluation> {
  const metadataFile = path.join(directory, METADATA_FILE);
  let metadata: EvaluationMetadata;
  try {
    metadata = JSON.parse(await readFile(metadataFile, 'utf8')) as EvaluationMetadata;
  } catch (error) {
    throw new PolicyloopError(`${directory} holds no evaluation: cannot read ${metadataFile}`, { cause: error });
  }
  let text = '';
  try {
    text = await readFile(path.join(directory, RESULTS_FILE), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const rows: EvaluationRow[] = [];
  let dropped = 0;
  const lines = text.split('\n');
  // Every line is written with its newline: text after the last one is a torn write.
  const torn = lines.pop();
  if (torn !== undefined && torn !== '') dropped += 1;
  for (const line of lines) {
    if (line === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      dropped += 1;
      continue;
    }
    if (isRow(value)) rows.push(value);
    else dropped += 1;
  }
  return { metadata, rows, dropped };
}

/**
 * The complete groups of `rows`: the rows of each example that has exactly one row for each
 * rollout index below `rolloutsPerExample` (a later duplicate is dropped), by example, in rollout
 * order. Examples at or past `numExamples` are left out.
 */
export function completeGroups(
  rows: readonly EvaluationRow[],
  settings: { readonly rolloutsPerExample: number; readonly numExamples: number },
): Map<number, EvaluationRow[]> {
  const byExample = new Map<number, (EvaluationRow | undefined)[]>();
  for (const row of rows) {
    if (row.example_id < 0 || row.example_id >= settings.numExamples) continue;
    if (row.rollout_index < 0 || row.rollout_index >= settings.rolloutsPerExample) continue;
    let slots = byExample.get(row.example_id);
    if (slots === undefined) {
      slots = new Array<EvaluationRow | undefined>(settings.rolloutsPerExample).fill(undefined);
      byExample.set(row.example_id, slots);
    }
    slots[row.rollout_index] ??= row;
  }
  const complete = new Map<number, EvaluationRow[]>();
  for (const [example, slots] of [...byExample.entries()].sort((a, b) => a[0] - b[0])) {
    if (slots.every((row) => row !== undefined)) complete.set(example, slots as EvaluationRow[]);
  }
  return complete;
}
