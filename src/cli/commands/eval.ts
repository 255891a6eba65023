/**
 * `policyloop eval <env> --model NAME [--model NAME ...]`: models measured on an environment's
 * eval tasks, side by side in one table. The models run on the embedded local service (started
 * in-process on `--data-dir`: base models and trained models `project/name[:stepN]`), or at an
 * OpenAI-compatible endpoint (`--base-url`). Each model's run is written to its folder after every
 * group (one model: the out folder itself; several: one subfolder each, named by the model's slug),
 * so that Ctrl-C, or a kill, loses only the groups in flight: `--resume DIR` finishes them.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentLoadError } from '../../environments/environment-errors.js';
import type { Environment } from '../../environments/environment.js';
import { METADATA_FILE } from '../../environments/eval-files.js';
import type { EvaluationMetadata } from '../../environments/eval-files.js';
import type { EvaluationProgress } from '../../environments/evaluate.js';
import { loadEnvironment } from '../../environments/load-environment.js';
import { ENV, readEnv } from '../../internal/env.js';
import { APIUserAbortError, InvalidArgumentError } from '../../internal/errors.js';
import { formatProgress } from '../../rollout/progress-bar.js';
import { McpServerError } from '../../tools/mcp/mcp-errors.js';
import { formatNumber, out, outJson, progress, progressDone, showsProgress, table, UsageError } from '../context.js';
import { finiteNumber, positiveInteger } from './resources.js';

/** Options of `eval` (declared in `eval-command.ts`, parsed by commander). */
export interface EvalOptions {
  model?: string[] | undefined;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  dataDir: string;
  examples?: string | undefined;
  rolloutsPerExample?: string | undefined;
  concurrency: string;
  envArgs?: string | undefined;
  threshold?: string | undefined;
  temperature?: string | undefined;
  maxTokens?: string | undefined;
  timeout?: string | undefined;
  out?: string | undefined;
  resume?: string | undefined;
  json?: boolean | undefined;
}

/** `--env-args` as an object, else a usage error. */
export function parseEnvArgs(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      `expected --env-args to be a JSON object, got ${JSON.stringify(text)}: ${(error as Error).message}`,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`expected --env-args to be a JSON object, got ${JSON.stringify(text)}`);
  }
  return value as Record<string, unknown>;
}

/** The environment `id` loaded with `args`; one that cannot be loaded is a usage error (exit 2). */
export async function loadForCommand(id: string, args: Record<string, unknown>): Promise<Environment<unknown>> {
  try {
    return await loadEnvironment(id, args);
  } catch (error) {
    throw asUsageError(error);
  }
}

/**
 * An environment that cannot be loaded or started (an MCP server that does not start), or an
 * argument the library refused, as a usage error (exit 2).
 */
export function asUsageError(error: unknown): unknown {
  // An environment file loaded through tsx has its own copy of the library: its McpServerError is
  // another class of the same name.
  const serverFailed = error instanceof McpServerError || (error instanceof Error && error.name === 'McpServerError');
  if (error instanceof EnvironmentLoadError || error instanceof InvalidArgumentError || serverFailed) {
    return new UsageError(error.message, { cause: error });
  }
  return error;
}

/**
 * The folder name of a model: its name with every run of characters other than letters, digits,
 * `.`, `_` and `-` as one `-` (`policyloop/tiny-chat` → `policyloop-tiny-chat`,
 * `demo/agent:step3` → `demo-agent-step3`).
 */
export function modelSlug(name: string): string {
  const slug = name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '');
  return slug === '' || slug === '.' || slug === '..' ? 'model' : slug;
}

/** `evals/<env>-<UTC date and time>`, the folder of a run given no `--out`. */
function defaultOut(environment: Environment<unknown>): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return path.join('evals', `${modelSlug(environment.name)}-${stamp}`);
}

/** A number for the table: 4 significant digits, `-` for none. */
function cell(value: number | null | undefined): string {
  return value === null || value === undefined || Number.isNaN(value) ? '-' : formatNumber(value);
}

/** One column of the table: a model's numbers, and where they are. */
export interface ResultColumn {
  readonly label: string;
  readonly metadata: EvaluationMetadata;
  readonly outDir: string;
}

/**
 * Prints the numbers of one or several runs side by side: reward mean ± std, each metric's,
 * the error count, pass@k and pass^k; then where each run is.
 */
export function printResults(columns: readonly ResultColumn[], heading: string): void {
  const first = columns[0];
  if (first === undefined) return;
  const metrics = [...new Set(columns.flatMap((column) => Object.keys(column.metadata.avg_metrics)))].sort();
  const ks = [...new Set(columns.flatMap((column) => Object.keys(column.metadata.pass_at_k)))].sort(
    (a, b) => Number(a) - Number(b),
  );
  const both = (mean: number | null | undefined, std: number | null | undefined): string =>
    mean === null || mean === undefined ? '-' : `${cell(mean)} ± ${cell(std)}`;
  const rows: string[][] = [
    ['reward', ...columns.map((column) => both(column.metadata.avg_reward, column.metadata.std_reward))],
    ...metrics.map((name) => [
      name,
      ...columns.map((column) => both(column.metadata.avg_metrics[name], column.metadata.std_metrics[name])),
    ]),
    ['errors', ...columns.map((column) => String(column.metadata.errors))],
    ...ks.map((k) => [`pass@${k}`, ...columns.map((column) => cell(column.metadata.pass_at_k[k]))]),
    ...ks.map((k) => [`pass^${k}`, ...columns.map((column) => cell(column.metadata.pass_all_k[k]))]),
  ];
  out(heading);
  out(table(['', ...columns.map((column) => column.label)], rows));
  for (const column of columns) out(`${columns.length > 1 ? `${column.label}: ` : ''}results in ${column.outDir}`);
}

/** Parses the flags into evaluation settings; a bad one is a usage error. */
function parseFlags(options: EvalOptions): {
  models: string[];
  examples: number | undefined;
  rolloutsPerExample: number | undefined;
  concurrency: number;
  threshold: number | undefined;
  sampling: Record<string, unknown> | undefined;
  timeout: number | undefined;
} {
  const models = options.model ?? [];
  if (models.length === 0) throw new UsageError('give the model to evaluate: --model NAME (repeat to compare several)');
  if (new Set(models.map(modelSlug)).size !== models.length) {
    throw new UsageError(`two --model values have one folder name: ${models.map(modelSlug).join(', ')}`);
  }
  if (options.out !== undefined && options.resume !== undefined) {
    throw new UsageError('give --out DIR (a new run) or --resume DIR (a run to finish), not both');
  }
  const sampling: Record<string, unknown> = {};
  if (options.temperature !== undefined) sampling['temperature'] = finiteNumber('--temperature', options.temperature);
  if (options.maxTokens !== undefined) sampling['max_tokens'] = positiveInteger('--max-tokens', options.maxTokens);
  const timeout = options.timeout === undefined ? undefined : finiteNumber('--timeout', options.timeout);
  if (timeout !== undefined && timeout <= 0) throw new UsageError(`expected --timeout > 0 seconds, got ${timeout}`);
  // On --resume, what is not given comes from the run's metadata.json (given, it must match).
  const resuming = options.resume !== undefined;
  return {
    models,
    examples: options.examples === undefined ? undefined : positiveInteger('--examples', options.examples),
    rolloutsPerExample:
      options.rolloutsPerExample === undefined
        ? undefined
        : positiveInteger('--rollouts-per-example', options.rolloutsPerExample),
    concurrency: positiveInteger('--concurrency', options.concurrency),
    threshold: options.threshold === undefined ? undefined : finiteNumber('--threshold', options.threshold),
    sampling: resuming && Object.keys(sampling).length === 0 ? undefined : sampling,
    timeout: timeout === undefined ? undefined : timeout * 1000,
  };
}

/** Answers one chat completion of `model` (1 token) at the local service, or says why not (a 404 names the models it has). */
async function checkLocalModel(baseURL: string, apiKey: string, model: string): Promise<void> {
  const response = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
  });
  if (response.ok) {
    await response.body?.cancel();
    return;
  }
  const body = (await response.json().catch(() => null)) as { detail?: unknown; error?: { message?: unknown } } | null;
  const detail = body?.error?.message ?? body?.detail ?? response.statusText;
  const message = `--model ${model}: ${typeof detail === 'string' ? detail : JSON.stringify(detail)} (HTTP ${response.status})`;
  throw response.status === 404 || response.status === 400 || response.status === 422
    ? new UsageError(message)
    : new Error(message);
}

/** The metadata of the first of `folders` that holds a run (the settings a resumed comparison shares). */
async function siblingRun(folders: readonly string[]): Promise<EvaluationMetadata | undefined> {
  for (const folder of folders) {
    try {
      return JSON.parse(await readFile(path.join(folder, METADATA_FILE), 'utf8')) as EvaluationMetadata;
    } catch {
      // no run there yet
    }
  }
  return undefined;
}

/** The `eval` subcommand; resolves to the exit code (130 after Ctrl-C). */
export async function evalCommand(envId: string, options: EvalOptions): Promise<number> {
  const flags = parseFlags(options);
  const envArgs = parseEnvArgs(options.envArgs);
  const environment = await loadForCommand(envId, envArgs);
  const base = options.resume ?? options.out ?? defaultOut(environment);
  if (options.resume !== undefined && !existsSync(options.resume)) {
    throw new UsageError(`--resume ${options.resume}: no such folder`);
  }
  const folders = flags.models.map((model) => (flags.models.length === 1 ? base : path.join(base, modelSlug(model))));
  if (options.resume !== undefined && flags.models.length === 1 && !existsSync(path.join(base, METADATA_FILE))) {
    throw new UsageError(`--resume ${base}: it holds no evaluation (no ${METADATA_FILE})`);
  }

  const { PromptedModel } = await import('../../training/prompted-model.js');
  const { evaluate } = await import('../../environments/evaluate.js');
  const controller = new AbortController();
  const onSignal = (): void => {
    // A second Ctrl-C does not wait for the rollouts in flight to stop.
    if (controller.signal.aborted) process.exit(130);
    controller.abort(new Error('interrupted'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let backend: import('../../backends/local-backend.js').LocalBackend | undefined;
  try {
    let endpoint: { baseURL: string; apiKey: string };
    if (options.baseUrl !== undefined) {
      endpoint = { baseURL: options.baseUrl, apiKey: options.apiKey ?? readEnv(ENV.openAIApiKey) ?? 'none' };
    } else {
      const { LocalBackend } = await import('../../backends/local-backend.js');
      backend = new LocalBackend({ dataDir: options.dataDir });
      const connection = await backend.connect({ signal: controller.signal });
      endpoint = { baseURL: connection.baseURL, apiKey: connection.apiKey };
      for (const model of flags.models) await checkLocalModel(endpoint.baseURL, endpoint.apiKey, model);
    }
    const columns: ResultColumn[] = [];
    for (const [index, name] of flags.models.entries()) {
      const folder = folders[index] as string;
      const model = new PromptedModel({
        project: 'eval',
        name: modelSlug(name),
        model: name,
        baseURL: endpoint.baseURL,
        apiKey: endpoint.apiKey,
        dataDir: options.dataDir,
      });
      // Several models on --resume: a model whose run never started starts now, with the settings
      // of the runs that did (what was not given takes theirs).
      const resume = options.resume !== undefined && existsSync(path.join(folder, METADATA_FILE)) ? folder : undefined;
      const sibling = resume === undefined && options.resume !== undefined ? await siblingRun(folders) : undefined;
      const onProgress = showsProgress()
        ? (event: EvaluationProgress) =>
            progress(
              formatProgress({
                done: event.done,
                total: event.total,
                failed: event.errors,
                rewardMean: event.rewardMean,
              }).replace(/^gather/, `eval ${name}`),
            )
        : undefined;
      let result: Awaited<ReturnType<typeof evaluate>>;
      try {
        result = await evaluate(environment, {
          model,
          envId,
          examples: flags.examples ?? sibling?.num_examples,
          rolloutsPerExample:
            resume === undefined
              ? (flags.rolloutsPerExample ?? sibling?.rollouts_per_example ?? 1)
              : flags.rolloutsPerExample,
          concurrency: flags.concurrency,
          threshold: flags.threshold ?? sibling?.threshold,
          sampling: resume === undefined ? (flags.sampling ?? sibling?.sampling ?? {}) : flags.sampling,
          timeout: flags.timeout,
          ...(resume === undefined ? { out: folder } : { resume }),
          signal: controller.signal,
          onProgress,
        });
      } catch (error) {
        progressDone();
        if (error instanceof APIUserAbortError || controller.signal.aborted) {
          process.stderr.write(
            `policyloop eval: interrupted; the finished groups are in ${path.resolve(folder)}: finish with the same command and --resume ${base}\n`,
          );
          return 130;
        }
        throw asUsageError(error);
      }
      progressDone();
      columns.push({ label: name, metadata: result.metadata, outDir: result.outDir ?? path.resolve(folder) });
    }
    if (options.json) {
      for (const column of columns) outJson({ ...column.metadata, out_dir: column.outDir });
    } else {
      const metadata = (columns[0] as ResultColumn).metadata;
      printResults(
        columns,
        `${environment.name} (${envId}): ${metadata.num_examples} task(s) x ${metadata.rollouts_per_example} rollout(s), correct at reward >= ${metadata.threshold}`,
      );
    }
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await backend?.close();
  }
}
