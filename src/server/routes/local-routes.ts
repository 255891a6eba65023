/**
 * The local service's own read routes (and one write route) under `/v1/local/`: what the
 * dashboard, the command line and `model.history()` read. Not part of the training API contract;
 * same key, same 401/404/422 shapes and the same cursor pages as the contract's routes.
 */
import type { Context } from 'hono';
import {
  CreateStepMetricsRequest,
  LocalModelListQuery,
  LoggedTrajectoryGroupListQuery,
  PageQuery,
  StepMetricsListQuery,
  type LocalModelResponse,
  type LocalTrainingJobResponse,
  type StepMetricsResponse,
} from '../../schema/index.js';
import { validationFailure } from '../http-error.js';
import { idempotentWrite, type WriteRequest } from '../idempotent-write.js';
import { operation } from '../operations.js';
import type { RouteTable } from '../route-table.js';
import { parseBody, readIdParam, readQuery, requireModel, type ServiceContext } from '../service-context.js';
import type { JobRecord, ModelRecord, StepMetricsRecord } from '../store/index.js';
import { toJobResponse } from './job-routes.js';
import { toModelResponse } from './model-routes.js';
import { toPage } from './pages.js';

/** Registers the local-only routes: models, step metrics, jobs and logged trajectory groups. */
export function registerLocalRoutes(routes: RouteTable, service: ServiceContext): void {
  const { store } = service;

  routes.add(operation('listLocalModels'), async (context) => {
    const query = readQuery(context, LocalModelListQuery);
    const page = store.models.list({ ...query, after: cursorOf(query.after) });
    if (page === undefined) throw unknownCursor('model', query.after);
    return context.json(toPage(page.items.map(toLocalModelResponse), page.hasMore));
  });

  routes.add(operation('getLocalModel'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    return context.json(toLocalModelResponse(requireModel(service, modelId)));
  });

  routes.add(operation('listStepMetrics'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    const query = readQuery(context, StepMetricsListQuery);
    requireModel(service, modelId);
    const after = cursorOf(query.after);
    const parsed = after === undefined ? undefined : parseMetricsCursor(after);
    const page =
      after !== undefined && parsed === undefined
        ? undefined
        : store.stepMetrics.listMerged(modelId, {
            split: query.split,
            after: parsed,
            limit: query.limit,
            maxBytes: service.options.maxPageBytes,
          });
    if (page === undefined) throw unknownCursor('step and split', query.after);
    return context.json(toPage(page.items.map(toStepMetricsResponse), page.hasMore));
  });

  // A write like the log route's: it honours Idempotency-Key (see idempotentWrite).
  const createMetrics = (context: Context, request: WriteRequest): Response => {
    const modelId = readIdParam(context, 'model_id');
    const body = parseBody(CreateStepMetricsRequest, request.body);
    requireModel(service, modelId);
    const { answer } = request.commit(
      () => store.stepMetrics.append(modelId, body.step, body.split, body.metrics),
      toStepMetricsResponse,
    );
    return context.json(answer);
  };
  routes.add(
    operation('createStepMetrics'),
    idempotentWrite(service, createMetrics, (context) => readIdParam(context, 'model_id')),
  );

  routes.add(operation('listModelJobs'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    const query = readQuery(context, PageQuery);
    requireModel(service, modelId);
    const page = store.jobs.list(modelId, { ...query, after: cursorOf(query.after) });
    if (page === undefined) throw unknownCursor('job', query.after, "this model's list");
    return context.json(toPage(page.items.map(toLocalJobResponse), page.hasMore));
  });

  routes.add(operation('listLoggedGroups'), async (context) => {
    const modelId = readIdParam(context, 'model_id');
    const query = readQuery(context, LoggedTrajectoryGroupListQuery);
    requireModel(service, modelId);
    const page = store.logs.listGroups(modelId, {
      ...query,
      after: cursorOf(query.after),
      maxBytes: service.options.maxPageBytes,
    });
    if (page === undefined) throw unknownCursor('logged group', query.after, "this model's list");
    return context.json(toPage(page.items, page.hasMore));
  });
}

/** An empty `after` (`?after=`) means no cursor: the first page. */
function cursorOf(after: string | undefined): string | undefined {
  return after === '' ? undefined : after;
}

function unknownCursor(kind: string, after: string | undefined, list = 'the list') {
  return validationFailure(['query', 'after'], `No ${kind} with id ${JSON.stringify(after)} in ${list}`);
}

/** `"<step>:<split>"` back to its parts; undefined when it is not of that form. */
function parseMetricsCursor(cursor: string): { step: number; split: string } | undefined {
  const match = /^(0|[1-9]\d{0,15}):(.+)$/.exec(cursor);
  if (match === null) return undefined;
  return { step: Number(match[1]), split: match[2] as string };
}

function toLocalModelResponse(model: ModelRecord): LocalModelResponse {
  return { ...toModelResponse(model), latest_step: model.latest_step, created_at: model.created_at };
}

function toStepMetricsResponse(record: StepMetricsRecord): StepMetricsResponse {
  return {
    id: `${record.step}:${record.split}`,
    step: record.step,
    split: record.split,
    metrics: record.metrics,
    updated_at: record.updated_at,
  };
}

function toLocalJobResponse(job: JobRecord): LocalTrainingJobResponse {
  return { ...toJobResponse(job), kind: job.kind };
}
