/**
 * `policyloop health`, `models list|create|delete`, `checkpoints list|delete`, `jobs get|events`:
 * thin commands over the client, each printing a table or line (or JSON with `--json`).
 */
import type { TrainingClient } from '../../client/index.js';
import { delay } from '../../internal/delay.js';
import type { LocalModelResponse, ReceivedTrainingJobEvent } from '../../schema/index.js';
import {
  type CommonOptions,
  explainMissingLocalRoutes,
  formatNumber,
  out,
  outJson,
  progress,
  progressDone,
  resolveModel,
  table,
  UsageError,
} from '../context.js';

/** `health`: the service's liveness answer. */
export async function health(client: TrainingClient, options: CommonOptions): Promise<number> {
  const answer = await client.health({ timeout: 10_000 });
  if (options.json) outJson(answer);
  else out(`ok: ${client.baseURL} answers (${JSON.stringify(answer)})`);
  return 0;
}

/** `models list`: the local service's models, newest first. */
export async function listModels(
  client: TrainingClient,
  options: CommonOptions & {
    project?: string | undefined;
    name?: string | undefined;
    entity?: string | undefined;
    limit?: string | undefined;
  },
): Promise<number> {
  const limit = options.limit === undefined ? undefined : positiveInteger('--limit', options.limit);
  const models: LocalModelResponse[] = [];
  const query = { project: options.project, name: options.name, entity: options.entity, limit: 100 };
  try {
    for await (const model of client.local.models.list(query)) {
      models.push(model);
      if (limit !== undefined && models.length >= limit) break;
    }
  } catch (error) {
    throw explainMissingLocalRoutes(client, error);
  }
  if (options.json) {
    for (const model of models) outJson(model);
    return 0;
  }
  if (models.length === 0) {
    out('no models');
    return 0;
  }
  out(
    table(
      ['id', 'model', 'base model', 'step', 'created'],
      models.map((model) => [
        model.id,
        `${model.entity}/${model.project}/${model.name}`,
        model.base_model,
        model.latest_step,
        model.created_at,
      ]),
    ),
  );
  return 0;
}

/** `models create project/name --base-model X`: gets or creates a model. */
export async function createModel(
  client: TrainingClient,
  reference: string,
  options: CommonOptions & { baseModel: string; entity?: string | undefined },
): Promise<number> {
  const parts = reference.split('/');
  if (parts.length !== 2 || parts.some((part) => part === '')) {
    throw new UsageError(`expected project/name, got ${JSON.stringify(reference)}`);
  }
  const [project, name] = parts as [string, string];
  const model = await client.models.create({
    entity: options.entity ?? null,
    project,
    name,
    base_model: options.baseModel,
    return_existing: true,
  });
  if (options.json) outJson(model);
  else out(`${model.id}  ${model.entity}/${model.project}/${model.name}  (${model.base_model})`);
  return 0;
}

/** `models delete <model>`: deletes a model with its checkpoints. */
export async function deleteModel(client: TrainingClient, reference: string, options: CommonOptions): Promise<number> {
  const id = reference.includes('/') ? (await resolveModel(client, reference)).id : reference;
  const result = await client.models.delete(id);
  if (options.json) outJson(result);
  else out(`deleted model ${result.model_id} and ${result.deleted_checkpoints} checkpoint(s)`);
  return 0;
}

/** `checkpoints list <model>`: steps with their metrics. */
export async function listCheckpoints(
  client: TrainingClient,
  reference: string,
  options: CommonOptions,
): Promise<number> {
  const id = reference.includes('/') ? (await resolveModel(client, reference)).id : reference;
  const rows: (string | number)[][] = [];
  for await (const checkpoint of client.checkpoints.list(id, { limit: 100, order: 'asc' })) {
    if (options.json) outJson(checkpoint);
    else
      rows.push([
        checkpoint.step,
        checkpoint.id,
        Object.entries(checkpoint.metrics)
          .map(([name, value]) => `${name}=${formatNumber(value)}`)
          .join(' '),
      ]);
  }
  if (!options.json) out(rows.length === 0 ? 'no checkpoints' : table(['step', 'id', 'metrics'], rows));
  return 0;
}

/** `checkpoints delete <model> --steps 1,2`. */
export async function deleteCheckpoints(
  client: TrainingClient,
  reference: string,
  options: CommonOptions & { steps: string },
): Promise<number> {
  const steps = options.steps.split(',').map((step) => nonNegativeInteger('--steps', step.trim()));
  const id = reference.includes('/') ? (await resolveModel(client, reference)).id : reference;
  const result = await client.checkpoints.delete(id, { steps });
  if (options.json) outJson(result);
  else {
    out(`deleted ${result.deleted_count} checkpoint(s)`);
    if (result.not_found_steps.length > 0) out(`not found: step ${result.not_found_steps.join(', ')}`);
  }
  return 0;
}

/** `jobs get <job-id>`. */
export async function getJob(client: TrainingClient, jobId: string, options: CommonOptions): Promise<number> {
  const job = await client.jobs.retrieve(jobId);
  if (options.json) outJson(job);
  else
    out(
      table(
        ['field', 'value'],
        Object.entries(job)
          .filter(([, value]) => value !== undefined && value !== null)
          .map(([field, value]) => [field, typeof value === 'object' ? JSON.stringify(value) : String(value)]),
      ),
    );
  return 0;
}

/**
 * `jobs events <job-id> [--follow]`: prints the events so far; with `--follow`, goes on until the
 * terminal event and exits 0 on `training_ended`, 1 on `training_failed`.
 */
export async function jobEvents(
  client: TrainingClient,
  jobId: string,
  options: CommonOptions & { follow?: boolean | undefined },
): Promise<number> {
  let after: string | undefined;
  let total: number | null = null;
  let steps = 0;
  for (;;) {
    const page = await client.jobs.events(jobId, { after, limit: 100, wait_ms: options.follow ? 10_000 : 0 });
    for (const event of page.data) {
      after = event.id;
      progressDone();
      if (options.json) outJson(event);
      else out(describeEvent(event));
      if (event.type === 'training_started') total = numberOr(event.data, 'num_sequences');
      if (event.type === 'gradient_step') steps += 1;
      if (event.type === 'training_ended') return 0;
      if (event.type === 'training_failed') return 1;
      if (options.follow) progress(`job ${jobId}: ${steps}${total === null ? '' : `/${total}`} gradient steps`);
    }
    if (page.has_more) continue;
    if (!options.follow) return 0;
    // A service without long polls answers at once: do not spin.
    if (page.data.length === 0) await delay(500);
  }
}

function describeEvent(event: ReceivedTrainingJobEvent): string {
  const data = event.data as Record<string, unknown> | null | undefined;
  const details = Object.entries(data ?? {})
    .map(([name, value]) => `${name}=${typeof value === 'number' ? formatNumber(value) : String(value)}`)
    .join(' ');
  return `${event.type}${details === '' ? '' : `  ${details}`}`;
}

function numberOr(data: unknown, name: string): number | null {
  const value = (data as Record<string, unknown> | null | undefined)?.[name];
  return typeof value === 'number' ? value : null;
}

/** `text` as an integer >= 1, else a usage error naming `option`. */
export function positiveInteger(option: string, text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < 1)
    throw new UsageError(`expected ${option} to be an integer >= 1, got ${JSON.stringify(text)}`);
  return value;
}

/** `text` as an integer >= 0, else a usage error naming `option`. */
export function nonNegativeInteger(option: string, text: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`expected ${option} to be integers >= 0, got ${JSON.stringify(text)}`);
  return Number(text);
}

/** `text` as a finite number, else a usage error naming `option`. */
export function finiteNumber(option: string, text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value))
    throw new UsageError(`expected ${option} to be a number, got ${JSON.stringify(text)}`);
  return value;
}
