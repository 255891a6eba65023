/** Models, checkpoints and the log route. */
import { rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Context } from 'hono';
import {
  CheckpointListQuery,
  computeStepStatistics,
  DeleteCheckpointsRequest,
  prefixMetrics,
  type CheckpointResponse,
  type DeleteCheckpointsResponse,
  type DeleteModelResponse,
  type ModelResponse,
} from '../../schema/index.js';
import { fastParseLogRequest } from '../../schema/fast-parse.js';
import { z } from 'zod';
import { LogBody, LogSplit, registerModelBody } from '../contract.js';
import { HttpError, validationFailure } from '../http-error.js';
import { idempotentWrite, type WriteRequest } from '../idempotent-write.js';
import { topLevelArrayElements } from '../json-slices.js';
import { operation } from '../operations.js';
import type { RouteTable } from '../route-table.js';
import {
  contractContextOf,
  parseBody,
  readBody,
  readIdParam,
  readQuery,
  requireModel,
  type ServiceContext,
} from '../service-context.js';
import type { CheckpointRecord, ModelRecord } from '../store/index.js';
import { toPage } from './pages.js';

/** The check of `split` that the log body's fast path skips (the same as `LogBody`'s). */
const FAST_PATH_SPLIT = z.object({ split: LogSplit });

/** Registers the model, checkpoint and log operations. */
export function registerModelRoutes(routes: RouteTable, service: ServiceContext): void {
  const { store, options } = service;

  // The POSTs that write honour Idempotency-Key (see idempotentWrite): their writes go through `request.commit`.
  const createModel = (context: Context, request: WriteRequest): Response => {
    // Names, and a base model the engine serves: the same schema the OpenAPI document shows.
    const body = parseBody(registerModelBody(contractContextOf(service)), request.body);
    const entity = body.entity ?? options.entity;
    const existing = store.models.find(entity, body.project, body.name);
    if (existing !== undefined) {
      const name = `${entity}/${body.project}/${body.name}`;
      if (!body.return_existing)
        throw new HttpError(409, `Model ${name} already exists; send return_existing: true to get it`);
      if (existing.base_model !== body.base_model) {
        throw new HttpError(
          409,
          `Model ${name} already exists with base model ${existing.base_model}, not ${body.base_model}`,
        );
      }
      // Stored for the key too: a retry gets this answer even if the model is deleted meanwhile.
      return context.json(request.commit(() => existing, toModelResponse).answer);
    }
    const { answer } = request.commit(
      () => store.models.create({ entity, project: body.project, name: body.name, base_model: body.base_model }),
      toModelResponse,
    );
    return context.json(answer);
  };
  routes.add(operation('registerModel'), idempotentWrite(service, createModel));

  routes.add(operation('deleteModel'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    const deleted = store.models.delete(modelId);
    if (deleted === undefined) throw new HttpError(404, `Model ${modelId} not found`);
    await service.runner.stopModel(modelId);
    await rm(resolve(options.dataDir, 'weights', modelId), { recursive: true, force: true });
    const response: DeleteModelResponse = {
      model_id: modelId,
      deleted_checkpoints: deleted.length,
      deleted_run: false,
    };
    return context.json(response);
  });

  routes.add(operation('listCheckpoints'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    const query = readQuery(context, CheckpointListQuery);
    requireModel(service, modelId);
    // An empty `after` (`?after=`) means no cursor: the first page.
    const page = store.checkpoints.list(modelId, { ...query, after: query.after === '' ? undefined : query.after });
    if (page === undefined)
      throw validationFailure(
        ['query', 'after'],
        `No checkpoint with id ${JSON.stringify(query.after)} in this model's list`,
      );
    return context.json(toPage(page.items.map(toCheckpointResponse), page.hasMore));
  });

  routes.add(operation('deleteCheckpoints'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    const body = await readBody(service, context, DeleteCheckpointsRequest);
    requireModel(service, modelId);
    const { deleted, notFound } = store.checkpoints.delete(modelId, body.steps);
    await removeCheckpointFiles(service, deleted);
    const response: DeleteCheckpointsResponse = { deleted_count: deleted.length, not_found_steps: notFound };
    return context.json(response);
  });

  const log = (context: Context, request: WriteRequest): Response => {
    const modelId = readIdParam(context, 'model_id');
    // The fast path accepts the common shapes; anything else (and every 422) goes through zod.
    const fast = fastParseLogRequest(request.body);
    const body = fast ?? parseBody(LogBody, request.body);
    // The fast path's split gets the same check as LogBody's.
    if (fast !== undefined) parseBody(FAST_PATH_SPLIT, { split: fast.split });
    // Each group is stored as the client sent it when the fast path accepted the body (reading
    // normalizes it the same way): serializing the groups again cost about as much as parsing them.
    const groupTexts = fast === undefined ? undefined : groupTextsOf(request.text, body.trajectory_groups.length);
    const model = requireModel(service, modelId);
    const statistics = computeStepStatistics(body.trajectory_groups);
    const storedAt = logStep(body.split, body.trajectory_groups, model.latest_step);
    const { answer } = request.commit(
      () =>
        store.logs.insert({
          modelId,
          split: body.split,
          step: storedAt,
          groups: body.trajectory_groups,
          groupTexts,
          statistics,
        }),
      () => ({
        model_id: modelId,
        split: body.split,
        step: model.latest_step,
        metrics: prefixMetrics(statistics.metrics, body.split),
      }),
    );
    return context.json(answer);
  };
  // A bad model id is refused before the body is read.
  routes.add(
    operation('logTrajectories'),
    idempotentWrite(service, log, (context) => readIdParam(context, 'model_id')),
  );
}

/** Deletes the weight files of deleted checkpoints, and a remote engine's copies of them. */
async function removeCheckpointFiles(service: ServiceContext, deleted: readonly CheckpointRecord[]): Promise<void> {
  await Promise.all(
    deleted.map(async (checkpoint) => {
      const directory = resolve(service.options.dataDir, checkpoint.path);
      // A remote engine frees its copy first (best effort: the local rows are gone either way).
      await service.engine.deleteCheckpoint?.(directory).catch(() => undefined);
      await rm(directory, { recursive: true, force: true });
    }),
  );
}

/**
 * The step a log's groups are stored under. One step number everywhere: `train` groups are stored
 * under the step they train (the model's step when they are logged, before the job; they may have
 * been sampled a step or two earlier, which each trajectory's `initial_policy_version` keeps).
 * Other splits under the step they were sampled at when their trajectories all say so (a
 * validation run in the background may arrive after the step moved on), else the model's step.
 */
function logStep(
  split: string,
  groups: readonly { trajectories: readonly { initial_policy_version?: number | null | undefined }[] }[],
  latestStep: number,
): number {
  return split === 'train' ? latestStep : (sharedSampledStep(groups, latestStep) ?? latestStep);
}

/**
 * The `initial_policy_version` every trajectory of `groups` shares, when it is a step the model
 * has reached (0..`latestStep`); null when one lacks it or they differ.
 */
function sharedSampledStep(
  groups: readonly { trajectories: readonly { initial_policy_version?: number | null | undefined }[] }[],
  latestStep: number,
): number | null {
  let step: number | null = null;
  for (const group of groups)
    for (const trajectory of group.trajectories) {
      const version = trajectory.initial_policy_version;
      if (typeof version !== 'number' || (step !== null && version !== step)) return null;
      step = version;
    }
  return step !== null && step >= 0 && step <= latestStep ? step : null;
}

/** The wire form of a model. */
export function toModelResponse(model: ModelRecord): ModelResponse {
  return {
    id: model.id,
    entity: model.entity,
    project: model.project,
    name: model.name,
    base_model: model.base_model,
    run_id: null,
  };
}

function toCheckpointResponse(checkpoint: CheckpointRecord): CheckpointResponse {
  return { id: checkpoint.id, step: checkpoint.step, metrics: checkpoint.metrics };
}

/** The text of each trajectory group in a log body, or undefined when the scan does not find `count` groups. */
function groupTextsOf(text: string, count: number): string[] | undefined {
  const ranges = topLevelArrayElements(text, 'trajectory_groups');
  if (ranges === undefined || ranges.length !== count) return undefined;
  return ranges.map(([start, end]) => text.slice(start, end));
}
