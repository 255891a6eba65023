/**
 * `policyloop history <model>`: the latest metrics per step, from the local service's metrics
 * route, or (for the hosted service) from `history.jsonl` under `--data-dir`.
 */
import type { TrainingClient } from '../../client/index.js';
import { NotFoundError } from '../../client/errors.js';
import { familySplit, historyRowsFromService, readHistory, splitOf } from '../../training/history.js';
import type { HistoryRow, ServiceStepMetrics } from '../../training/history.js';
import { modelFiles } from '../../training/model-files.js';
import { type CommonOptions, formatNumber, lookUpModel, out, outJson, table, UsageError } from '../context.js';

/** Options of `history` (and what `report` reads with). */
export interface HistoryOptions extends CommonOptions {
  /** `--split`: only this split's metrics. */
  split?: string | undefined;
  /** `--metric`: only these metrics (names as in history.jsonl, `val/reward`, or without the split). */
  metric?: string[] | undefined;
  /** `--data-dir`: where `history.jsonl` lives, for a service without the local routes. */
  dataDir?: string | undefined;
}

/**
 * The model's history rows, one per step (the service's, merged over every client), or
 * `history.jsonl`'s when the service has no local routes and `--data-dir` names the file.
 */
export async function loadHistory(
  client: TrainingClient,
  reference: string,
  options: HistoryOptions,
): Promise<{ rows: HistoryRow[]; source: string }> {
  try {
    const model = await lookUpModel(client, reference);
    const items: ServiceStepMetrics[] = [];
    for await (const item of client.local.metrics.list(model.id, { limit: 100, split: options.split }))
      items.push(item);
    return { rows: historyRowsFromService(items), source: `${client.baseURL} (model ${model.id})` };
  } catch (error) {
    if (!(error instanceof NotFoundError) || !isLocalRoutesMissing(error)) throw error;
    if (options.dataDir === undefined) {
      throw new Error(
        `${client.baseURL} has no local routes (the hosted service keeps no history): pass --data-dir DIR to read the history.jsonl a script wrote there`,
      );
    }
  }
  const parts = reference.split('/');
  if (parts.length < 2) {
    throw new UsageError('the service has no local routes: give the model as project/name to read history.jsonl');
  }
  const [project, name] = parts.slice(-2) as [string, string];
  const file = modelFiles(options.dataDir, project, name).history;
  return { rows: await readHistory(file), source: file };
}

/** True when a 404 says the route is missing (the hosted service), not that the model is. */
function isLocalRoutesMissing(error: NotFoundError): boolean {
  const detail = (error.body as { detail?: unknown } | undefined)?.detail;
  return !(typeof detail === 'string' && /^Model .* not found/.test(detail));
}

/** Keeps the metrics `--split` and `--metric` ask for (a metric without `/` matches any split). */
export function selectMetrics(rows: readonly HistoryRow[], options: HistoryOptions): HistoryRow[] {
  const wanted = options.metric?.flatMap((metric) => metric.split(',')).filter((metric) => metric !== '');
  return rows
    .map((row) => {
      const kept: Record<string, number | boolean | string> = {
        training_step: row.training_step,
        recorded_at: row.recorded_at,
      };
      const home = familySplit(row);
      for (const [name, value] of Object.entries(row)) {
        if (name === 'training_step' || name === 'recorded_at') continue;
        if (options.split !== undefined && splitOf(name, home) !== options.split) continue;
        if (wanted !== undefined && !wanted.some((metric) => name === metric || name.endsWith(`/${metric}`))) continue;
        kept[name] = value;
      }
      return kept as HistoryRow;
    })
    .filter((row) => Object.keys(row).length > 2);
}

/** The metric names to show by default: rewards and losses first, then the rest, at most 6. */
function defaultColumns(rows: readonly HistoryRow[]): string[] {
  const names = new Set<string>();
  for (const row of rows) for (const name of Object.keys(row)) if (name.includes('/')) names.add(name);
  const rank = (name: string) =>
    name.endsWith('/reward') ? 0 : name.endsWith('/loss') ? 1 : name.split('/').length > 2 ? 3 : 2;
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b)).slice(0, 6);
}

/** `history <model>`. */
export async function history(client: TrainingClient, reference: string, options: HistoryOptions): Promise<number> {
  const { rows, source } = await loadHistory(client, reference, options);
  const selected = selectMetrics(rows, options);
  if (options.json) {
    for (const row of selected) outJson(row);
    return 0;
  }
  if (selected.length === 0) {
    out(`no metrics recorded for ${reference}${options.split || options.metric ? ' matching the filters' : ''}`);
    return 0;
  }
  const columns =
    options.metric === undefined
      ? defaultColumns(selected)
      : [...new Set(selected.flatMap((row) => Object.keys(row).filter((name) => name.includes('/'))))];
  out(
    table(
      ['step', ...columns],
      selected.map((row) => [
        row.training_step,
        ...columns.map((name) => {
          const value = row[name];
          return typeof value === 'number' ? formatNumber(value) : value === undefined ? '' : String(value);
        }),
      ]),
    ),
  );
  if (options.metric === undefined) {
    const all = new Set(selected.flatMap((row) => Object.keys(row).filter((name) => name.includes('/'))));
    if (all.size > columns.length)
      out(`(${all.size - columns.length} more metric(s): --metric NAME shows them, --json shows all; from ${source})`);
  }
  return 0;
}
